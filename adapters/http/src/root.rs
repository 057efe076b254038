//! `GET /`: a fixed answer that checks nothing, so a human can see the process answers.

use salvo::prelude::*;

pub(crate) struct Root;

#[salvo::async_trait]
impl Handler for Root {
    async fn handle(
        &self,
        _req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        res.render(Text::Plain("QueueBox is running!"));
    }
}
