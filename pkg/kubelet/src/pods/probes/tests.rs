use super::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k1s_cri::v1 as cri;
use k1s_cri::{CriError, CriOp, ExecScript, FakeRuntime};
use k8s_openapi::api::core::v1::{
    ContainerPort, EnvVar, ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, TCPSocketAction,
};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

/// What the in-process HTTP server does for a path.
pub(crate) type Handler =
    Arc<dyn Fn(&http::Request<hyper::body::Incoming>) -> (u16, Vec<(String, String)>, String) + Send + Sync>;

/// Requests the server saw: (path, headers).
pub(crate) type Seen = Arc<Mutex<Vec<(String, http::HeaderMap)>>>;

/// An HTTP/1.1 server on 127.0.0.1 answering with `handler`; returns its port and log.
pub(crate) async fn serve(handler: Handler, delay: Duration) -> (u16, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let handler = handler.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let handler = handler.clone();
                    let log = log.clone();
                    async move {
                        log.lock().expect("log").push((
                            req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default(),
                            req.headers().clone(),
                        ));
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        let (status, headers, body) = handler(&req);
                        let mut resp = http::Response::builder().status(status);
                        for (k, v) in headers {
                            resp = resp.header(k, v);
                        }
                        Ok::<_, Infallible>(resp.body(Full::new(Bytes::from(body))).expect("response"))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    (port, seen)
}

pub(crate) fn status(code: u16) -> Handler {
    Arc::new(move |_| (code, vec![], format!("status {code}")))
}

fn container() -> Container {
    Container {
        name: "app".into(),
        ports: Some(vec![ContainerPort { name: Some("http".into()), container_port: 8080, ..Default::default() }]),
        env: Some(vec![EnvVar { name: "FILE".into(), value: Some("/tmp/ready".into()), value_from: None }]),
        ..Default::default()
    }
}

pub(crate) fn target(container_id: &str) -> ProbeTarget {
    ProbeTarget {
        pod_ip: Some("127.0.0.1".parse().expect("ip")),
        container_id: container_id.into(),
        container: container(),
    }
}

fn http_probe(port: i32, path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction { path: Some(path.into()), port: IntOrString::Int(port), ..Default::default() }),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

#[test]
fn ports_resolve_by_number_name_or_numeric_string() {
    let c = container();
    assert_eq!(resolve_port(&IntOrString::Int(80), &c), Ok(80));
    assert_eq!(resolve_port(&IntOrString::String("http".into()), &c), Ok(8080));
    assert_eq!(resolve_port(&IntOrString::String("9090".into()), &c), Ok(9090));
    assert_eq!(
        resolve_port(&IntOrString::String("metrics".into()), &c),
        Err("strconv.Atoi: parsing \"metrics\": invalid syntax".to_string())
    );
    assert_eq!(resolve_port(&IntOrString::Int(0), &c), Err("invalid port number: 0".to_string()));
    assert_eq!(resolve_port(&IntOrString::Int(70000), &c), Err("invalid port number: 70000".to_string()));
}

#[test]
fn durations_print_like_go() {
    assert_eq!(go_duration(Duration::from_secs(1)), "1s");
    assert_eq!(go_duration(Duration::from_millis(300)), "300ms");
    assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
    assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
}

#[tokio::test]
async fn http_2xx_succeeds_and_5xx_fails_with_the_status_code() {
    let rt = FakeRuntime::new();
    let (ok_port, seen) = serve(status(200), Duration::ZERO).await;
    let out = probe_once(&rt, &http_probe(i32::from(ok_port), "/healthz"), &target("c1")).await;
    assert_eq!(out, ProbeOutcome::new(ProbeResult::Success, "status 200"));
    let (path, headers) = seen.lock().expect("seen")[0].clone();
    assert_eq!(path, "/healthz");
    assert_eq!(headers["user-agent"], "kube-probe/1.35");
    assert_eq!(headers["accept"], "*/*");
    assert_eq!(headers["host"], format!("127.0.0.1:{ok_port}").as_str());

    let (bad_port, _) = serve(status(500), Duration::ZERO).await;
    let out = probe_once(&rt, &http_probe(i32::from(bad_port), "/"), &target("c1")).await;
    assert_eq!(out, ProbeOutcome::new(ProbeResult::Failure, "HTTP probe failed with statuscode: 500"));
}

#[tokio::test]
async fn http_headers_and_host_override_are_sent() {
    let rt = FakeRuntime::new();
    let (port, seen) = serve(status(204), Duration::ZERO).await;
    let mut probe = http_probe(i32::from(port), "/x?y=1");
    let action = probe.http_get.as_mut().expect("http");
    action.http_headers = Some(vec![
        HTTPHeader { name: "X-Custom".into(), value: "1".into() },
        HTTPHeader { name: "Host".into(), value: "example.test".into() },
        HTTPHeader { name: "User-Agent".into(), value: "mine".into() },
        HTTPHeader { name: "Accept".into(), value: "".into() },
    ]);
    assert_eq!(probe_once(&rt, &probe, &target("c1")).await.result, ProbeResult::Success);
    let (path, headers) = seen.lock().expect("seen")[0].clone();
    assert_eq!(path, "/x?y=1");
    assert_eq!(headers["x-custom"], "1");
    assert_eq!(headers["host"], "example.test");
    assert_eq!(headers["user-agent"], "mine");
    assert!(headers.get("accept").is_none(), "an empty Accept removes the header");
}

#[tokio::test]
async fn http_refused_connection_reads_like_go() {
    let rt = FakeRuntime::new();
    let port = closed_port();
    let out = probe_once(&rt, &http_probe(i32::from(port), "/"), &target("c1")).await;
    assert_eq!(out.result, ProbeResult::Failure);
    assert_eq!(
        out.output,
        format!("Get \"http://127.0.0.1:{port}/\": dial tcp 127.0.0.1:{port}: connect: connection refused")
    );
}

#[tokio::test]
async fn http_slow_server_times_out() {
    let rt = FakeRuntime::new();
    let (port, _) = serve(status(200), Duration::from_secs(3)).await;
    let started = std::time::Instant::now();
    let out = probe_once(&rt, &http_probe(i32::from(port), "/"), &target("c1")).await;
    assert!(started.elapsed() < Duration::from_secs(2), "bounded by timeoutSeconds");
    assert_eq!(out.result, ProbeResult::Failure);
    assert_eq!(
        out.output,
        format!("Get \"http://127.0.0.1:{port}/\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
    );
}

#[tokio::test]
async fn http_redirects_to_the_same_host_are_followed() {
    let rt = FakeRuntime::new();
    let handler: Handler = Arc::new(|req| match req.uri().path() {
        "/old" => (302, vec![("location".into(), "/new".into())], String::new()),
        "/new" => (200, vec![], "moved here".into()),
        "/away" => (301, vec![("location".into(), "http://192.0.2.1/".into())], "bye".into()),
        "/loop" => (307, vec![("location".into(), "/loop".into())], String::new()),
        _ => (404, vec![], String::new()),
    });
    let (port, seen) = serve(handler, Duration::ZERO).await;
    let out = probe_once(&rt, &http_probe(i32::from(port), "/old"), &target("c1")).await;
    assert_eq!(out, ProbeOutcome::new(ProbeResult::Success, "moved here"));

    // Another host: the redirect itself is the answer, a warning that counts as success.
    let out = probe_once(&rt, &http_probe(i32::from(port), "/away"), &target("c1")).await;
    assert_eq!(out, ProbeOutcome::new(ProbeResult::Warning, "Probe terminated redirects, Response body: bye"));

    seen.lock().expect("seen").clear();
    let out = probe_once(&rt, &http_probe(i32::from(port), "/loop"), &target("c1")).await;
    assert_eq!(out.result, ProbeResult::Failure);
    assert_eq!(out.output, "Get \"/loop\": stopped after 10 redirects");
    assert_eq!(seen.lock().expect("seen").len(), 11);
}

#[tokio::test]
async fn http_body_is_read_up_to_ten_kib() {
    let rt = FakeRuntime::new();
    let (port, _) = serve(Arc::new(|_| (200, vec![], "x".repeat(50_000))), Duration::ZERO).await;
    let out = probe_once(&rt, &http_probe(i32::from(port), "/"), &target("c1")).await;
    assert_eq!(out.result, ProbeResult::Success);
    assert_eq!(out.output.len(), 10 * 1024);
}

#[tokio::test]
async fn https_probes_skip_certificate_verification() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let server_cfg = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else { return };
        let Ok(tls) = acceptor.accept(stream).await else { return };
        let svc = service_fn(|_req: http::Request<hyper::body::Incoming>| async {
            Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from_static(b"secure"))))
        });
        let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
    });
    let mut probe = http_probe(i32::from(port), "/");
    probe.http_get.as_mut().expect("http").scheme = Some("HTTPS".into());
    let out = probe_once(&FakeRuntime::new(), &probe, &target("c1")).await;
    assert_eq!(out, ProbeOutcome::new(ProbeResult::Success, "secure"));
}

#[tokio::test]
async fn named_port_that_does_not_exist_is_unknown() {
    let rt = FakeRuntime::new();
    let mut probe = http_probe(80, "/");
    probe.http_get.as_mut().expect("http").port = IntOrString::String("metrics".into());
    let out = probe_once(&rt, &probe, &target("c1")).await;
    assert_eq!(out, ProbeOutcome::new(ProbeResult::Unknown, "strconv.Atoi: parsing \"metrics\": invalid syntax"));
}

fn tcp_probe(port: u16) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction { host: None, port: IntOrString::Int(i32::from(port)) }),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

#[tokio::test]
async fn tcp_succeeds_on_a_listener_and_fails_on_a_closed_port() {
    let rt = FakeRuntime::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    assert_eq!(probe_once(&rt, &tcp_probe(port), &target("c1")).await, ProbeOutcome::new(ProbeResult::Success, ""));
    let closed = closed_port();
    assert_eq!(
        probe_once(&rt, &tcp_probe(closed), &target("c1")).await,
        ProbeOutcome::new(ProbeResult::Failure, format!("dial tcp 127.0.0.1:{closed}: connect: connection refused"))
    );
}

/// A fake runtime with one running container named `app`; returns its id.
pub(crate) async fn running_container(rt: &FakeRuntime) -> String {
    use k1s_cri::RuntimeService as _;
    rt.add_image("busybox");
    let sandbox_config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: "p".into(),
            uid: "u".into(),
            namespace: "ns".into(),
            attempt: 0,
        }),
        ..Default::default()
    };
    let sb = rt
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .expect("sandbox");
    let created = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sb.pod_sandbox_id,
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 0 }),
                image: Some(cri::ImageSpec { image: "busybox".into(), ..Default::default() }),
                ..Default::default()
            }),
            sandbox_config: Some(sandbox_config),
        })
        .await
        .expect("create");
    rt.start_container(cri::StartContainerRequest { container_id: created.container_id.clone() }).await.expect("start");
    created.container_id
}

fn exec_probe(cmd: &[&str]) -> Probe {
    Probe {
        exec: Some(ExecAction { command: Some(cmd.iter().map(|s| s.to_string()).collect()) }),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

#[tokio::test]
async fn exec_exit_code_decides_and_output_is_reported() {
    let rt = FakeRuntime::new();
    let id = running_container(&rt).await;
    rt.script_exec(
        ExecScript::responds(cri::ExecSyncResponse {
            stdout: b"out\n".to_vec(),
            stderr: b"err\n".to_vec(),
            exit_code: 1,
        })
        .for_command(["check"]),
    );
    assert_eq!(probe_once(&rt, &exec_probe(&["true"]), &target(&id)).await.result, ProbeResult::Success);
    assert_eq!(
        probe_once(&rt, &exec_probe(&["check"]), &target(&id)).await,
        ProbeOutcome::new(ProbeResult::Failure, "out\nerr\n")
    );
}

#[tokio::test]
async fn exec_command_expands_literal_env_and_sends_the_timeout() {
    let rt = FakeRuntime::new();
    let id = running_container(&rt).await;
    rt.script_exec(ExecScript::exits(0, "ready").for_command(["cat", "/tmp/ready"]));
    let mut probe = exec_probe(&["cat", "$(FILE)"]);
    probe.timeout_seconds = Some(5);
    assert_eq!(probe_once(&rt, &probe, &target(&id)).await, ProbeOutcome::new(ProbeResult::Success, "ready"));
}

#[tokio::test]
async fn exec_timeout_is_a_failure_and_runtime_errors_are_unknown() {
    let rt = FakeRuntime::new();
    let id = running_container(&rt).await;
    rt.script_exec(
        ExecScript::fails(CriError::rpc(CriOp::ExecSync, k1s_cri::Code::DeadlineExceeded, "timeout 1s exceeded"))
            .for_command(["sleep", "10"]),
    );
    assert_eq!(
        probe_once(&rt, &exec_probe(&["sleep", "10"]), &target(&id)).await,
        ProbeOutcome::new(ProbeResult::Failure, "command \"sleep 10\" timed out")
    );
    let out = probe_once(&rt, &exec_probe(&["true"]), &target("gone")).await;
    assert_eq!(out.result, ProbeResult::Unknown);
    assert!(out.output.starts_with("rpc error: code = NotFound desc = "), "{}", out.output);
    // Unknown results are retried: three ExecSync calls for the missing container.
    assert_eq!(rt.calls().iter().filter(|c| c.op == CriOp::ExecSync && c.target == "gone").count(), 3);
}

#[tokio::test]
async fn grpc_probe_checks_the_pod_ip() {
    let port = super::grpc::tests::serve(super::grpc::tests::Answer::Status(1)).await;
    let probe = Probe {
        grpc: Some(GRPCAction { port: i32::from(port), service: None }),
        timeout_seconds: Some(2),
        ..Default::default()
    };
    assert_eq!(
        probe_once(&FakeRuntime::new(), &probe, &target("c1")).await,
        ProbeOutcome::new(ProbeResult::Success, "service is serving")
    );
}

// ----- the worker ---------------------------------------------------------------------------

struct Scripted {
    rt: Arc<FakeRuntime>,
    id: String,
    rx: mpsc::Receiver<ProbeUpdate>,
    tx: mpsc::Sender<ProbeUpdate>,
}

async fn scripted() -> Scripted {
    let rt = Arc::new(FakeRuntime::new());
    let id = running_container(&rt).await;
    let (tx, rx) = mpsc::channel(64);
    Scripted { rt, id, rx, tx }
}

use tokio::sync::mpsc;

impl Scripted {
    fn spawn(&self, kind: ProbeKind, probe: Probe) -> ProbeHandle {
        ProbeWorker::spawn(kind, probe, target(&self.id), self.rt.clone(), self.tx.clone(), CancellationToken::new())
    }

    /// Makes the `check` command answer `code` from now on.
    fn answer(&self, code: i32) {
        self.rt.script_exec(ExecScript::exits(code, format!("exit {code}")).for_command(["check"]));
    }

    fn exec_count(&self) -> usize {
        self.rt.count(CriOp::ExecSync)
    }
}

use tokio_util::sync::CancellationToken;

fn periodic(period: i32, success: i32, failure: i32) -> Probe {
    Probe {
        period_seconds: Some(period),
        success_threshold: Some(success),
        failure_threshold: Some(failure),
        ..exec_probe(&["check"])
    }
}

/// Lets spawned tasks run without moving the paused clock.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn readiness_turns_ready_after_success_threshold_and_unready_after_failure_threshold() {
    let mut s = scripted().await;
    s.answer(0);
    let h = s.spawn(ProbeKind::Readiness, periodic(10, 2, 3));
    h.startup_succeeded();
    settle().await;
    assert_eq!(s.exec_count(), 1, "first probe right away");
    assert!(s.rx.try_recv().is_err(), "one success is below the success threshold");
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    let u = s.rx.try_recv().expect("ready");
    assert_eq!((u.kind, u.result, u.changed), (ProbeKind::Readiness, ProbeResult::Success, true));

    s.answer(1);
    for _ in 0..2 {
        tokio::time::advance(Duration::from_secs(10)).await;
        settle().await;
        let u = s.rx.try_recv().expect("failure event");
        assert_eq!((u.result, u.changed, u.probe_result), (ProbeResult::Success, false, ProbeResult::Failure));
        assert_eq!(u.event().expect("event").message, "Readiness probe failed: exit 1");
    }
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    let u = s.rx.try_recv().expect("unready");
    assert_eq!((u.result, u.changed), (ProbeResult::Failure, true));
    // Readiness keeps probing after failing.
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert!(s.rx.try_recv().is_ok());
    assert!(!h.is_finished());
}

#[tokio::test(start_paused = true)]
async fn initial_delay_skips_early_periods() {
    let mut s = scripted().await;
    s.answer(0);
    let mut probe = periodic(5, 1, 3);
    probe.initial_delay_seconds = Some(12);
    let h = s.spawn(ProbeKind::Readiness, probe);
    h.startup_succeeded();
    settle().await;
    for _ in 0..2 {
        tokio::time::advance(Duration::from_secs(5)).await;
        settle().await;
    }
    assert_eq!(s.exec_count(), 0, "nothing before 12 s");
    tokio::time::advance(Duration::from_secs(5)).await;
    settle().await;
    assert_eq!(s.exec_count(), 1);
    assert_eq!(s.rx.try_recv().expect("ready").result, ProbeResult::Success);
}

#[tokio::test(start_paused = true)]
async fn liveness_waits_for_startup_and_stops_after_failing() {
    let mut s = scripted().await;
    s.answer(1);
    let h = s.spawn(ProbeKind::Liveness, periodic(10, 1, 2));
    settle().await;
    tokio::time::advance(Duration::from_secs(30)).await;
    settle().await;
    assert_eq!(s.exec_count(), 0, "gated until startup succeeded");
    h.startup_succeeded();
    settle().await;
    assert_eq!(s.exec_count(), 1, "probes as soon as the gate opens");
    let u = s.rx.try_recv().expect("first failure");
    assert_eq!((u.result, u.changed), (ProbeResult::Success, false));
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    let u = s.rx.try_recv().expect("liveness failed");
    assert_eq!((u.kind, u.result, u.changed), (ProbeKind::Liveness, ProbeResult::Failure, true));
    assert_eq!(u.event().expect("event").message, "Liveness probe failed: exit 1");
    settle().await;
    assert!(h.is_finished(), "on hold until a new container");
}

#[tokio::test(start_paused = true)]
async fn startup_success_is_reported_once_and_ends_the_worker() {
    let mut s = scripted().await;
    s.answer(1);
    let h = s.spawn(ProbeKind::Startup, periodic(1, 1, 30));
    settle().await;
    assert_eq!(s.rx.try_recv().expect("failure").result, ProbeResult::Unknown);
    s.answer(0);
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    let u = s.rx.try_recv().expect("started");
    assert_eq!((u.kind, u.result, u.changed), (ProbeKind::Startup, ProbeResult::Success, true));
    settle().await;
    assert!(h.is_finished());
}

#[tokio::test(start_paused = true)]
async fn errors_do_not_count_towards_thresholds() {
    let mut s = scripted().await;
    s.rt.script_exec(
        ExecScript::fails(CriError::rpc(CriOp::ExecSync, k1s_cri::Code::Unknown, "cannot register an exec PID"))
            .for_command(["check"]),
    );
    let h = s.spawn(ProbeKind::Liveness, periodic(10, 1, 1));
    h.startup_succeeded();
    settle().await;
    let u = s.rx.try_recv().expect("errored");
    assert_eq!((u.result, u.changed, u.probe_result), (ProbeResult::Success, false, ProbeResult::Unknown));
    assert_eq!(
        u.event().expect("event").message,
        "Liveness probe errored and resulted in unknown state: rpc error: code = Unknown desc = cannot register an exec PID"
    );
    assert!(!h.is_finished());
}

#[tokio::test(start_paused = true)]
async fn trigger_probes_now_and_drop_stops_the_worker() {
    let s = scripted().await;
    s.answer(0);
    let h = s.spawn(ProbeKind::Readiness, periodic(60, 1, 3));
    h.startup_succeeded();
    settle().await;
    assert_eq!(s.exec_count(), 1);
    h.trigger();
    settle().await;
    assert_eq!(s.exec_count(), 2);
    drop(h);
    tokio::time::advance(Duration::from_secs(120)).await;
    settle().await;
    assert_eq!(s.exec_count(), 2);
}
