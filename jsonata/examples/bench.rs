//! Throughput check: `cargo run --release --example bench`.
use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::json;
use std::time::Instant;

fn main() {
    let data = json!({
        "Account": {
            "Account Name": "Firefly",
            "Order": [
                {"OrderID": "order103", "Product": [
                    {"Product Name": "Bowler Hat", "ProductID": 858383, "SKU": "0406654608", "Price": 34.45, "Quantity": 2},
                    {"Product Name": "Trilby hat", "ProductID": 858236, "SKU": "0406634348", "Price": 21.67, "Quantity": 1}]},
                {"OrderID": "order104", "Product": [
                    {"Product Name": "Bowler Hat", "ProductID": 858383, "SKU": "040657863", "Price": 34.45, "Quantity": 4},
                    {"Product Name": "Cloak", "ProductID": 345664, "SKU": "0406654603", "Price": 107.99, "Quantity": 1}]}
            ]
        }
    });
    let exprs = [
        "Account.Order.Product.SKU",
        "$sum(Account.Order.Product.(Price * Quantity))",
        "Account.Order.Product[Price > 30].{'name': `Product Name`, 'total': Price * Quantity}",
        "Account.Order{OrderID: $sum(Product.Price)}",
        "$uppercase(Account.`Account Name`) & '-' & $string($count(Account.Order))",
    ];
    let limits = Limits::default();
    let bindings = Bindings::new();
    for src in exprs {
        let Ok(e) = Expression::compile(src) else {
            continue;
        };
        let n = 20_000;
        let start = Instant::now();
        for _ in 0..n {
            let _ = e.evaluate(&data, &bindings, &limits);
        }
        let secs = start.elapsed().as_secs_f64();
        println!("{:>9.0} evals/s  {src}", n as f64 / secs);
    }
}
