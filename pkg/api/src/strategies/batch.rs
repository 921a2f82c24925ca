//! Strategies for the batch resources.

use crate::strategy::{DynStrategy, Generic, Typed};

pub fn cron_job() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::batch::v1::CronJob>::default()))
}

pub fn job() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::batch::v1::Job>::default()))
}
