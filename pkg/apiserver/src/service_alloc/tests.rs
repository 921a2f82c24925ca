use super::*;

fn store(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store")
}

fn alloc_on(store: &Store, cidr: &str) -> ServiceAllocator {
    ServiceAllocator::new(&cidr.parse().expect("cidr"), store.clone()).expect("allocator")
}

fn svc(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// Stores the Service as the registry would after a successful allocation.
async fn put(store: &Store, s: &Value) {
    let key = format!("{SERVICES_PREFIX}default/{}", object::name(s));
    store.create(&key, object::to_storage(s)).await.expect("store the Service");
}

fn reserved_keys(store: &Store, prefix: &str) -> Vec<String> {
    store.list(prefix, None, 0, None).expect("list").items.into_iter().map(|kv| kv.key).collect()
}

#[tokio::test]
async fn cluster_ips_are_unique_and_explicit_ones_are_checked() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = alloc_on(&store(&dir), "10.43.0.0/16");
    let mut s1 = svc("a", json!({"ports": [{"port": 80}]}));
    let mut s2 = svc("b", json!({"ports": [{"port": 80}]}));
    a.allocate_create(&mut s1, false).await.expect("a");
    a.allocate_create(&mut s2, false).await.expect("b");
    assert_ne!(s1["spec"]["clusterIP"], s2["spec"]["clusterIP"]);
    assert_ne!(s1["spec"]["clusterIP"], "10.43.0.1");
    let mut dup = svc("c", json!({"clusterIP": s1["spec"]["clusterIP"].clone()}));
    let e = a.allocate_create(&mut dup, false).await.expect_err("duplicate");
    assert_eq!(e.code, 422);
    assert!(e.message.contains("provided IP is already allocated"), "{}", e.message);
    let mut out = svc("d", json!({"clusterIP": "10.99.0.1"}));
    assert!(a.allocate_create(&mut out, false).await.expect_err("range").message.contains("not in the valid range"));
    let mut k = svc("kubernetes", json!({"clusterIP": "10.43.0.1"}));
    a.allocate_create(&mut k, false).await.expect("first address on request");
    let mut headless = svc("h", json!({"clusterIP": "None"}));
    a.allocate_create(&mut headless, false).await.expect("headless");
    assert_eq!(headless["spec"]["clusterIP"], "None");
}

#[tokio::test]
async fn node_ports_are_allocated_refused_when_taken_and_released() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = alloc_on(&store(&dir), "10.43.0.0/16");
    let mut s = svc("np", json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 30080}]}));
    let t = a.allocate_create(&mut s, false).await.expect("np");
    let p0 = s["spec"]["ports"][0]["nodePort"].as_u64().expect("allocated");
    assert!((30000..=32767).contains(&p0));
    let mut clash = svc("x", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}));
    let e = a.allocate_create(&mut clash, false).await.expect_err("taken");
    assert_eq!(e.causes[0].field, "spec.ports[0].nodePort");
    assert!(e.message.contains("provided port is already allocated"), "{}", e.message);
    a.release_taken(&t).await;
    a.allocate_create(&mut clash, false).await.expect("free again");
    // Switching a NodePort Service back to ClusterIP gives its ports up.
    let mut to_cluster = clash.clone();
    to_cluster["spec"]["type"] = json!("ClusterIP");
    let (_, freed) = a.allocate_update(&mut to_cluster, &clash, false).await.expect("update");
    assert_eq!(freed, vec![Slot::Port(30080)]);
    assert!(to_cluster["spec"]["ports"][0].get("nodePort").is_none());
}

#[tokio::test]
async fn a_reservation_gives_back_what_it_took_on_abort_and_what_it_freed_on_commit() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = alloc_on(&store(&dir), "10.43.0.0/16");
    let hook: &dyn Allocator = &a;
    let mut s = svc("np", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30081}]}));
    hook.reserve_for_create(&mut s, false).await.expect("create").abort().await;
    let mut again = s.clone();
    hook.reserve_for_create(&mut again, false).await.expect("free again after abort").commit().await;
    let mut to_cluster = again.clone();
    to_cluster["spec"]["type"] = json!("ClusterIP");
    hook.reserve_for_update(&mut to_cluster, &again, false).await.expect("update").commit().await;
    let mut other = svc("x", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30081}]}));
    hook.reserve_for_create(&mut other, false).await.expect("freed by the committed update");
}

#[tokio::test]
async fn allocations_are_ipaddress_objects_and_port_reservations_in_the_store() {
    let dir = tempfile::tempdir().expect("tmp");
    let st = store(&dir);
    let a = alloc_on(&st, "10.43.0.0/16");
    let mut s =
        svc("web", json!({"type": "NodePort", "clusterIP": "10.43.0.7", "ports": [{"port": 80, "nodePort": 30007}]}));
    let mut dry = s.clone();
    a.allocate_create(&mut dry, true).await.expect("dry run");
    assert!(reserved_keys(&st, "/registry/").is_empty(), "a dry run reserves nothing");
    a.allocate_create(&mut s, false).await.expect("create");
    let ip = st.get("/registry/networking.k8s.io/ipaddresses/10.43.0.7").expect("get").expect("IPAddress stored");
    let ip: Value = serde_json::from_slice(&ip.value).expect("json");
    assert_eq!(ip["kind"], "IPAddress");
    assert_eq!(ip["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"], "ipallocator.k8s.io");
    assert_eq!(
        ip["spec"]["parentRef"],
        json!({"group": "", "resource": "services", "namespace": "default", "name": "web"})
    );
    assert_eq!(reserved_keys(&st, NODE_PORT_PREFIX), vec![format!("{NODE_PORT_PREFIX}30007")]);
    // Deleting the Service deletes both.
    a.release_service(&s).await;
    assert!(reserved_keys(&st, "/registry/").is_empty());
}

#[tokio::test]
async fn two_allocators_on_one_store_never_hand_out_the_same_address() {
    // Two API servers: one store, a cache each.
    let dir = tempfile::tempdir().expect("tmp");
    let st = store(&dir);
    let (a, b) = (alloc_on(&st, "10.43.0.0/27"), alloc_on(&st, "10.43.0.0/27"));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let al = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let mut s = svc(&format!("s{i}"), json!({"type": "NodePort", "ports": [{"port": 80}]}));
            al.allocate_create(&mut s, false).await.map(|_| s)
        }));
    }
    let mut ips = BTreeSet::new();
    let mut ports = BTreeSet::new();
    let mut full = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(s) => {
                assert!(ips.insert(s["spec"]["clusterIP"].as_str().expect("ip").to_string()), "{s}");
                assert!(ports.insert(s["spec"]["ports"][0]["nodePort"].as_u64().expect("port")), "{s}");
            }
            Err(e) => {
                assert_eq!(
                    (e.code, e.message.as_str()),
                    (500, "Internal error occurred: failed to allocate a serviceIP: range is full")
                );
                full += 1;
            }
        }
    }
    // A /27 has 32 addresses: network, broadcast and the `kubernetes` one are never handed out.
    assert_eq!((ips.len(), full), (29, 11));
    // What one frees the other hands out again, though its cache still shows it as taken.
    let kv = st.list(IP_PREFIX, None, 0, None).expect("list").items.into_iter().next().expect("one reserved");
    let slot = Slot::from_key(&kv.key).expect("a reservation key");
    let Slot::Ip(v) = slot else { panic!("an IP key: {}", kv.key) };
    let freed_ip = Ipv4Addr::from(v).to_string();
    let owner = Stored::read(slot, kv).owner.expect("its Service");
    let mut gone = svc(&owner.name, json!({"clusterIP": freed_ip}));
    a.release_service(&gone).await;
    let mut again = svc("again", json!({}));
    b.allocate_create(&mut again, false).await.expect("the freed address");
    assert_eq!(again["spec"]["clusterIP"], json!(freed_ip));
    gone["metadata"]["name"] = json!("explicit");
    let e = a.allocate_create(&mut gone, false).await.expect_err("taken through the other");
    assert!(e.message.contains("provided IP is already allocated"), "{}", e.message);
}

#[tokio::test]
async fn repair_reserves_what_services_hold_and_frees_leaks_after_the_grace_period() {
    let dir = tempfile::tempdir().expect("tmp");
    let st = store(&dir);
    let a = alloc_on(&st, "10.43.0.0/16");
    // A Service stored before reservations existed.
    let old = svc(
        "old",
        json!({"type": "NodePort", "clusterIP": "10.43.0.9", "clusterIPs": ["10.43.0.9"], "ports": [{"port": 80, "nodePort": 30009}]}),
    );
    put(&st, &old).await;
    // A reservation whose Service was never written (a crash between the two writes).
    let mut lost = svc("lost", json!({"ports": [{"port": 80}]}));
    a.allocate_create(&mut lost, false).await.expect("reserve");
    let repaired = a.repair().await.expect("repair");
    assert_eq!(repaired, Repaired { added: 2, removed: 0 }, "a fresh reservation is within its grace period");
    let mut clash = svc("new", json!({"clusterIP": "10.43.0.9"}));
    assert!(a.allocate_create(&mut clash, false).await.is_err(), "the old Service's address is reserved now");
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(LEAK_GRACE.as_secs() as i64 + 1);
    let repaired = a.repair_at(later).await.expect("repair");
    assert_eq!(repaired, Repaired { added: 0, removed: 1 });
    let lost_ip = lost["spec"]["clusterIP"].as_str().expect("ip");
    assert_eq!(reserved_keys(&st, IP_PREFIX), vec![format!("{IP_PREFIX}10.43.0.9")], "{lost_ip} was freed");
    assert_eq!(a.repair_at(later).await.expect("repair"), Repaired::default(), "nothing left to repair");
}

#[tokio::test]
async fn an_update_to_external_name_frees_the_cluster_ip_and_one_back_allocates_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let st = store(&dir);
    let a = alloc_on(&st, "10.43.0.0/16");
    let mut s = svc("flip", json!({"ports": [{"port": 80}]}));
    a.allocate_create(&mut s, false).await.expect("create");
    let ip = s["spec"]["clusterIP"].as_str().expect("ip").to_string();
    // The strategy clears the addresses of a Service that becomes ExternalName.
    let external = svc("flip", json!({"type": "ExternalName", "externalName": "example.com", "ports": [{"port": 80}]}));
    let (taken, freed) = a.allocate_update(&mut external.clone(), &s, false).await.expect("to ExternalName");
    assert!(taken.slots().is_empty());
    let v4: Ipv4Addr = ip.parse().expect("ipv4");
    assert_eq!(freed, vec![Slot::Ip(u32::from(v4))]);
    a.release_owned(&Owner::of(&s), &freed).await;
    assert!(reserved_keys(&st, IP_PREFIX).is_empty(), "the IPAddress went with the update");
    let mut back = svc("flip", json!({"type": "ClusterIP", "ports": [{"port": 80}]}));
    let (taken, freed) = a.allocate_update(&mut back, &external, false).await.expect("back to ClusterIP");
    assert!(freed.is_empty());
    assert_eq!(taken.slots().len(), 1);
    assert!(back["spec"]["clusterIP"].as_str().is_some_and(|ip| ip.starts_with("10.43.")), "{back}");
    assert_eq!(reserved_keys(&st, IP_PREFIX).len(), 1);
}

#[tokio::test]
async fn an_automatic_node_port_never_takes_one_a_later_port_of_the_same_service_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = alloc_on(&store(&dir), "10.43.0.0/16");
    // Leave exactly one free port before the named one, so the automatic pick would land on it.
    {
        let mut c = a.cache().expect("cache");
        c.seeded = true;
        c.ports = (NODE_PORT_MIN..=NODE_PORT_MAX).filter(|p| *p != 30100 && *p != 30101).collect();
        c.next_port = 30100;
    }
    let mut s = svc(
        "two",
        json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30100}]}),
    );
    a.allocate_create(&mut s, false).await.expect("both ports");
    assert_eq!(s["spec"]["ports"][0]["nodePort"], 30101);
    assert_eq!(s["spec"]["ports"][1]["nodePort"], 30100);
}
