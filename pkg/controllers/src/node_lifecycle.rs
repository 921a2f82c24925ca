//! The node_lifecycle controller.

use crate::Context;
use std::sync::Arc;

pub async fn run(ctx: Arc<Context>) {
    ctx.cancel.cancelled().await;
}
