//! A server built from a typed `Config`, without the command line: both
//! roles on one listener, the lock service's token fencing the store's
//! writes, the writers' credential and the Host gate in front of every
//! route, the data directory used for the lock service's state, and a
//! shutdown that ends `run`.

use fencing_runtime::Policy;
use fencing_server::assembly::{Config, GuardChoice, LockBackend, LocksConfig, StorageConfig, Store, start};
use fencing_server::http::ConnLimits;
use fencing_server::http::auth::{Access, BearerAuth};
use fencing_server::http::gate::HostRules;
use fencing_server::locks::EmbeddedConfig;
use fencing_server::storage::{DEFAULT_MAX_TOKEN_ADVANCE, FlapConfig};
use serde_json::{Value, json};

const TOKEN: &str = "writers-token-of-thirty-two-chars";

fn config(dir: &std::path::Path) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        storage: Some(StorageConfig {
            store: Store::Redb { space_reserve: 0, max_bytes: None },
            guard: GuardChoice::Native,
            policy: Policy::NonDecreasing,
            verifier: None,
            max_token_advance: DEFAULT_MAX_TOKEN_ADVANCE,
            flap: FlapConfig::default(),
        }),
        locks: Some(LocksConfig { backend: LockBackend::Embedded(EmbeddedConfig::default()), signer: None }),
        access: Access { writers: Some(BearerAuth::new(TOKEN)), operators: None },
        limits: ConnLimits::default(),
        host_rules: HostRules::default(),
    }
}

fn write(token: u64, bytes: &str) -> Value {
    json!({"resource_id": "orders", "fencing_token": token,
           "write_payload": {"file_path": "/a", "mutation_type": "PUT", "bytes": bytes}})
}

async fn post(http: &reqwest::Client, url: String, body: &Value) -> (u16, Value) {
    let answer = http.post(url).bearer_auth(TOKEN).json(body).send().await.unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_builds_a_server_whose_locks_fence_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path())).await.unwrap();
    let base = format!("http://{}", server.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();

    // The lock service is the embedded one, its state in the server's data directory.
    let acquire = json!({"resource_id": "orders", "client_id": "a", "lease_duration_ms": 60_000});
    let (status, first) = post(&http, format!("{base}/v1/locks/acquire"), &acquire).await;
    assert_eq!(status, 200, "{first}");
    assert!(dir.path().join(fencing_server::locks::CLOCK_FILE).exists());
    let released = json!({"resource_id": "orders", "lock_token": first["lock_token"]});
    assert_eq!(post(&http, format!("{base}/v1/locks/release"), &released).await.0, 200);
    let (_, second) = post(&http, format!("{base}/v1/locks/acquire"), &acquire).await;
    let (old, new) = (first["fencing_token"].as_u64().unwrap(), second["fencing_token"].as_u64().unwrap());
    assert!(new > old);

    // The store is fenced by those tokens: the newer holder's write stands.
    assert_eq!(post(&http, format!("{base}/v1/storage/write"), &write(new, "Qg==")).await.0, 200);
    let (status, late) = post(&http, format!("{base}/v1/storage/write"), &write(old, "QQ==")).await;
    assert_eq!((status, late["reason"].as_str()), (409, Some("stale_token")), "{late}");

    // The writers' credential guards every mutating route, and the gate is in front of it.
    let anonymous = http.post(format!("{base}/v1/storage/write")).json(&write(new + 1, "Qw==")).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    // Refused by the gate, not by authentication: a foreign Host learns nothing of the token.
    let foreign = http.post(format!("{base}/v1/storage/write")).header("host", "evil.example");
    assert_eq!(foreign.json(&write(new + 1, "Qw==")).send().await.unwrap().status().as_u16(), 421);

    // Both roles' series are in the one registry.
    let metrics = http.get(format!("{base}/metrics")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("fencing_storage_writes_admitted_total 1"), "{metrics}");
    assert!(metrics.contains("fencing_locks_"), "{metrics}");

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_is_not_a_component_is_named_and_nothing_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("not-a-component.wasm");
    std::fs::write(&plugin, b"not wasm").unwrap();
    let mut config = config(dir.path());
    if let Some(storage) = &mut config.storage {
        storage.guard = GuardChoice::Wasm { plugin: Some(plugin.clone()) };
    }
    match start(config).await {
        Err(e @ fencing_server::assembly::StartError::Plugin { .. }) => {
            assert!(e.to_string().contains("not-a-component.wasm"), "{e}")
        }
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("a server started with a plugin that is not a component"),
    }
}
