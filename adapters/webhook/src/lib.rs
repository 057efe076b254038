//! The HTTP destination of QueueBox (reqwest).
