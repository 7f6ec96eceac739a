//! `GET /openapi.json`: the OpenAPI 3.1 description of both APIs, generated
//! from the request and response types and the handlers' annotations (no
//! hand-written schema to drift from the code).
//!
//! Invariant: every status a route can answer is documented on it; the
//! statuses any route can get from the layers in front of it (the gate,
//! authentication, body decoding) are added to every operation by
//! `CommonErrors`, each with the one error body. [`document`] adds what
//! the annotations cannot say: the bearer scheme (optional: a server
//! without `--auth-token-file` takes none) and the links from a grant to its
//! renewal, release and status, and from a write to its object and fence,
//! which stateful testing follows. String lengths are in characters, as the
//! server counts them (`fencing_api::wire::names`; a test holds each
//! `maxLength` to its constant).

use super::ErrorBody;
use axum::Router;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa::openapi::response::{ResponseBuilder, ResponsesBuilder};
use utoipa::openapi::{ContentBuilder, Ref};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "fencing",
        description = "A lock service that hands out fencing tokens, and storage that refuses writes whose token is \
                       older than the resource's high-water mark. Every error answer is `{\"error\": {\"code\", \
                       \"message\", \"field\"?}}`, naming the field, parameter or header at fault."
    ),
    paths(
        super::storage::write,
        super::storage::read,
        super::storage::fence,
        super::locks::acquire,
        super::locks::renew,
        super::locks::release,
        super::locks::status,
        super::admin::reset,
        metrics,
    ),
    components(schemas(ErrorBody)),
    modifiers(&CommonErrors),
)]
pub struct ApiDoc;

/// Prometheus metrics of every subsystem.
#[utoipa::path(get, path = "/metrics", tag = "metrics",
    responses((status = 200, description = "OpenMetrics text", content_type = "application/openmetrics-text", body = String)))]
#[allow(dead_code)]
fn metrics() {}

/// Adds the answers of the layers in front of every route.
struct CommonErrors;

impl utoipa::Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let error = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
                )
                .build()
        };
        let common = [
            ("400", "Malformed: the error names the field, parameter or header"),
            ("401", "Authentication required (servers with --auth-token-file)"),
            ("403", "A browser page from another origin"),
            ("408", "The request body stalled"),
            ("413", "Request body over 8 MiB"),
            ("415", "Not `Content-Type: application/json`, or an encoded body"),
            ("421", "A Host this server does not serve"),
            ("500", "An unexpected failure; the outcome is unknown"),
            ("503", "Not available right now"),
        ];
        for item in openapi.paths.paths.values_mut() {
            for op in [&mut item.get, &mut item.post].into_iter().flatten() {
                let mut responses = std::mem::replace(&mut op.responses, ResponsesBuilder::new().build());
                for (status, description) in common {
                    if !responses.responses.contains_key(status) {
                        responses.responses.insert(status.to_owned(), error(description).into());
                    }
                }
                op.responses = responses;
            }
        }
    }
}

/// The description served: the generated one with its security scheme and links.
pub fn document() -> serde_json::Value {
    use serde_json::json;
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the description serializes");
    doc["components"]["securitySchemes"] = json!({
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "The writers' token, in the server's --auth-token-file; POST requests need it when \
                            the server has one, and reads too with --auth-reads. A server without one takes no \
                            credentials.",
        },
        "operator": {
            "type": "http",
            "scheme": "bearer",
            "description": "An operator's token, from the server's --admin-token-file: the operator routes \
                            (/v1/admin/...) need it and take no writer's token; a server without that file \
                            serves them to no one (403 admin_disabled).",
        },
    });
    // Either no credentials (a server without a token file) or the bearer token.
    doc["security"] = json!([{}, {"bearer": []}]);
    constrain_requests(&mut doc);
    bound_unsigned(&mut doc["components"]["schemas"]);
    let lease = json!({"resource_id": "$request.body#/resource_id", "lock_token": "$response.body#/lock_token"});
    doc["paths"]["/v1/locks/acquire"]["post"]["responses"]["200"]["links"] = json!({
        "renew": {"operationId": "renew", "requestBody": lease},
        "release": {"operationId": "release", "requestBody": lease},
        "status": {"operationId": "status", "parameters": {"resource_id": "$request.body#/resource_id"}},
    });
    doc["paths"]["/v1/storage/write"]["post"]["responses"]["200"]["links"] = json!({
        "read": {"operationId": "read", "parameters": {
            "resource_id": "$request.body#/resource_id",
            "file_path": "$request.body#/write_payload/file_path",
        }},
        "fence": {"operationId": "fence", "parameters": {"resource_id": "$request.body#/resource_id"}},
    });
    doc
}

/// The constraints the server enforces on a request's string field or query
/// parameter of this name, from the constants and patterns it checks with.
fn field_rule(field: &str) -> Option<serde_json::Value> {
    use crate::http::storage::{BYTES_PATTERN, MAX_PROOF_HEX, PROOF_PATTERN};
    use crate::storage::PATH_SEGMENTS_PATTERN;
    use fencing_api::wire::names::{MAX_NAME_CHARS, MAX_PATH_CHARS, MAX_REASON_CHARS, NAME_PATTERN, REASON_PATTERN};
    use serde_json::json;
    Some(match field {
        "resource_id" | "lock_id" | "client_id" => {
            json!({"minLength": 1, "maxLength": MAX_NAME_CHARS, "pattern": NAME_PATTERN})
        }
        "file_path" => json!({"minLength": 1, "maxLength": MAX_PATH_CHARS, "pattern": NAME_PATTERN,
                              "allOf": [{"pattern": PATH_SEGMENTS_PATTERN}]}),
        "reason" => json!({"minLength": 1, "maxLength": MAX_REASON_CHARS, "pattern": REASON_PATTERN}),
        "bytes" => json!({"pattern": BYTES_PATTERN}),
        "fencing_proof" => json!({"maxLength": MAX_PROOF_HEX, "pattern": PROOF_PATTERN}),
        _ => return None,
    })
}

/// Writes the server's own rules into every request body and query
/// parameter: each named field's [`field_rule`], and the rules that tie one
/// field to another (`bytes` with `PUT` and `APPEND`; a reset's `lock_id` and
/// `high_water` together, the mark at least 1).
fn constrain_requests(doc: &mut serde_json::Value) {
    use serde_json::json;
    let mut bodies = Vec::new();
    for item in doc["paths"].as_object_mut().expect("paths").values_mut() {
        for op in item.as_object_mut().expect("path item").values_mut() {
            // `get_mut`, not indexing, which would add `"parameters": null`.
            let params = op.get_mut("parameters").and_then(|p| p.as_array_mut());
            for param in params.into_iter().flatten() {
                if let Some(rule) = param["name"].as_str().and_then(field_rule) {
                    merge(&mut param["schema"], rule);
                }
            }
            if let Some(name) =
                op.pointer("/requestBody/content/application~1json/schema/$ref").and_then(|r| r.as_str())
            {
                bodies.push(name.rsplit('/').next().expect("a schema name").to_owned());
            }
        }
    }
    let schemas = &mut doc["components"]["schemas"];
    while let Some(name) = bodies.pop() {
        // Objects only: a nested `$ref` may be an enum (`Mutation`).
        let Some(props) = schemas[&name]["properties"].as_object_mut() else { continue };
        for (field, prop) in props.iter_mut() {
            if let Some(nested) = prop["$ref"].as_str() {
                bodies.push(nested.rsplit('/').next().expect("a schema name").to_owned());
            } else if let Some(rule) = field_rule(field) {
                merge(prop, rule);
            }
        }
    }
    schemas["WritePayload"]["if"] = json!({"properties": {"mutation_type": {"enum": ["PUT", "APPEND", "put", "append"]}}, "required": ["mutation_type"]});
    schemas["WritePayload"]["then"] = json!({"properties": {"bytes": {"type": "string"}}, "required": ["bytes"]});
    let together = |given: &str, kind: &str, needed: &str, needed_kind: &str| {
        json!({"if": {"properties": {given: {"type": kind}}, "required": [given]},
               "then": {"properties": {needed: {"type": needed_kind}}, "required": [needed]}})
    };
    let reset = &mut schemas["ResetBody"];
    reset["allOf"] = json!([
        together("lock_id", "string", "high_water", "integer"),
        together("high_water", "integer", "lock_id", "string")
    ]);
    reset["properties"]["high_water"]["minimum"] = json!(1);
}

/// Gives every unsigned integer property (one with a `minimum` of 0 or
/// more, the way utoipa writes a `u64`) the `maximum` the server reads it up to, 2^64-1, written
/// as the exact integer: without it a schema validator takes 9.9e19 as an
/// integer the server must accept.
fn bound_unsigned(schemas: &mut serde_json::Value) {
    let integer =
        |t: &serde_json::Value| t == "integer" || t.as_array().is_some_and(|a| a.iter().any(|t| t == "integer"));
    for schema in schemas.as_object_mut().into_iter().flat_map(|s| s.values_mut()) {
        let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) else { continue };
        for prop in props.values_mut() {
            if integer(&prop["type"]) && prop["minimum"].as_u64().is_some() && prop.get("maximum").is_none() {
                prop["maximum"] = serde_json::Value::from(u64::MAX);
            }
        }
    }
}

/// Adds `rule`'s keywords to `schema`.
fn merge(schema: &mut serde_json::Value, rule: serde_json::Value) {
    let serde_json::Value::Object(rule) = rule else { unreachable!("rules are objects") };
    for (keyword, value) in rule {
        schema[keyword] = value;
    }
}

/// The methods each path of the description takes (and `/openapi.json`'s
/// own), for the gate's 405.
pub fn routes() -> super::gate::Routes {
    use axum::http::Method;
    let doc = ApiDoc::openapi();
    let mut table: Vec<(String, Vec<Method>)> = doc
        .paths
        .paths
        .iter()
        .map(|(path, item)| {
            let methods = [(item.get.is_some(), Method::GET), (item.post.is_some(), Method::POST)];
            (path.clone(), methods.into_iter().filter_map(|(has, m)| has.then_some(m)).collect())
        })
        .collect();
    table.push(("/openapi.json".to_owned(), vec![Method::GET]));
    super::gate::Routes::new(table)
}

/// The route serving the description.
pub fn router() -> Router {
    let doc = document();
    Router::new().route("/openapi.json", get(move || std::future::ready(axum::Json(doc.clone()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described_with_the_common_errors() {
        let doc = ApiDoc::openapi();
        let paths: Vec<&str> = doc.paths.paths.keys().map(String::as_str).collect();
        for route in [
            "/v1/storage/write",
            "/v1/storage/read",
            "/v1/storage/fence",
            "/v1/locks/acquire",
            "/v1/locks/renew",
            "/v1/locks/release",
            "/v1/locks/status",
            "/v1/admin/fences/reset",
            "/metrics",
        ] {
            assert!(paths.contains(&route), "{route} is not described: {paths:?}");
        }
        let write = doc.paths.paths["/v1/storage/write"].post.as_ref().expect("POST /v1/storage/write");
        for status in ["200", "400", "409", "413", "415", "421", "503", "507"] {
            assert!(write.responses.responses.contains_key(status), "write lacks {status}");
        }
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["openapi"], "3.1.0");
        assert_eq!(json["components"]["schemas"]["WriteBody"]["additionalProperties"], false, "unknown fields refused");
    }

    /// Every name, path, reason and base64 field of a request and every query
    /// parameter carries the limit and pattern the server checks it with.
    #[test]
    fn request_strings_carry_the_servers_rules() {
        use fencing_api::wire::names::{name_problem, path_problem};
        let json = document();
        let mut fields: Vec<(String, &serde_json::Value)> = Vec::new();
        for name in ["WriteBody", "WritePayload", "AcquireRequest", "LeaseRef", "ResetBody"] {
            for (field, prop) in json["components"]["schemas"][name]["properties"].as_object().unwrap() {
                fields.push((format!("{name}.{field}"), prop));
            }
        }
        for item in json["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                assert!(op.get("parameters").is_none_or(|p| p.is_array()), "{}: parameters", op["operationId"]);
                for param in op["parameters"].as_array().into_iter().flatten() {
                    fields.push((format!("{}?{}", op["operationId"], param["name"]), &param["schema"]));
                }
            }
        }
        let mut checked = 0;
        for (at, schema) in fields {
            let field = at.rsplit(['.', '?']).next().unwrap().trim_matches('"');
            let Some(rule) = field_rule(field) else { continue };
            for (keyword, value) in rule.as_object().unwrap() {
                assert_eq!(&schema[keyword], value, "{at}: {keyword}");
            }
            if let Some(max) = schema["maxLength"].as_u64().filter(|_| field != "fencing_proof") {
                // Characters, not bytes: four-byte characters up to the limit pass.
                let padlock = "\u{1F512}";
                let text = padlock.repeat(max as usize);
                let problem = if field == "file_path" { path_problem(&text) } else { name_problem(&text) };
                assert!(problem.is_none() || field == "reason", "{at}: {problem:?}");
            }
            checked += 1;
        }
        assert_eq!(checked, 15, "fields checked");
        // The published limits are the ones the storage's own validators
        // hold: the limit passes there, one character more is refused.
        use crate::storage::{validate_file_path, validate_lock_id, validate_resource_id};
        type Validate = fn(&str) -> Result<(), crate::storage::StorageError>;
        let validators: [(&str, &str, Validate); 3] = [
            ("WriteBody", "resource_id", validate_resource_id),
            ("WriteBody", "lock_id", validate_lock_id),
            ("WritePayload", "file_path", validate_file_path),
        ];
        for (schema, field, validate) in validators {
            let max = json["components"]["schemas"][schema]["properties"][field]["maxLength"].as_u64().unwrap();
            assert!(validate(&"a".repeat(max as usize)).is_ok(), "{schema}.{field} at its maxLength {max}");
            assert!(validate(&"a".repeat(max as usize + 1)).is_err(), "{schema}.{field} past its maxLength {max}");
        }
        let reset = &json["components"]["schemas"]["ResetBody"];
        assert_eq!(reset["properties"]["high_water"]["minimum"], 1);
        assert_eq!(reset["allOf"].as_array().map(Vec::len), Some(2), "lock_id and high_water together");
        assert_eq!(json["components"]["schemas"]["WritePayload"]["then"]["required"][0], "bytes");
    }

    /// Every unsigned integer a request carries has its minimum and its
    /// maximum, as exact integers: 9.9e19 is out of range for the schema as
    /// for the server.
    #[test]
    fn unsigned_integers_carry_their_range() {
        let json = document();
        let schemas = &json["components"]["schemas"];
        let mut bounded = 0;
        for (schema, field) in [
            ("WriteBody", "fencing_token"),
            ("WriteBody", "sequence"),
            ("ResetBody", "high_water"),
            ("AcquireRequest", "lease_duration_ms"),
            ("AcquireRequest", "wait_ms"),
        ] {
            let prop = &schemas[schema]["properties"][field];
            assert!(prop["maximum"].as_u64().is_some(), "{schema}.{field}: {prop}");
            assert!(prop["minimum"].as_u64().is_some(), "{schema}.{field}: {prop}");
            bounded += 1;
        }
        assert_eq!(schemas["WriteBody"]["properties"]["fencing_token"]["maximum"], serde_json::json!(u64::MAX));
        assert_eq!(schemas["AcquireRequest"]["properties"]["wait_ms"]["maximum"], serde_json::json!(300_000));
        assert_eq!(bounded, 5);
        // The gate's route table is the description's.
        let routes = routes();
        assert!(format!("{routes:?}").contains("/v1/admin/fences/reset"));
    }

    #[test]
    fn the_bearer_scheme_and_the_links_are_described() {
        let json = document();
        assert_eq!(json["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
        let operations: Vec<String> = json["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values())
            .filter_map(|op| op["operationId"].as_str().map(str::to_owned))
            .collect();
        for (path, link) in
            [("/v1/locks/acquire", "renew"), ("/v1/locks/acquire", "status"), ("/v1/storage/write", "read")]
        {
            let target = &json["paths"][path]["post"]["responses"]["200"]["links"][link]["operationId"];
            assert!(operations.iter().any(|op| target == op), "{path} links to {target}, not an operation");
        }
    }

    /// `body::decode_json` refuses any array in a request body; that is right
    /// only while no request schema holds one.
    #[test]
    fn request_bodies_hold_no_arrays() {
        let json = document();
        let mut bodies = Vec::new();
        for (path, item) in json["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if let Some(schema) = op.pointer("/requestBody/content/application~1json/schema") {
                    bodies.push((format!("{method} {path}"), schema.clone()));
                }
            }
        }
        assert!(bodies.len() >= 5, "{bodies:?}");
        fn arrays(v: &serde_json::Value, schemas: &serde_json::Value, depth: usize) -> bool {
            match v {
                _ if depth > 16 => false,
                serde_json::Value::Object(o) => {
                    if o.get("type")
                        .is_some_and(|t| t == "array" || t.as_array().is_some_and(|a| a.contains(&"array".into())))
                    {
                        return true;
                    }
                    if let Some(r) = o.get("$ref").and_then(|r| r.as_str()) {
                        let name = r.rsplit('/').next().unwrap();
                        return arrays(&schemas[name], schemas, depth + 1);
                    }
                    o.values().any(|x| arrays(x, schemas, depth + 1))
                }
                serde_json::Value::Array(a) => a.iter().any(|x| arrays(x, schemas, depth + 1)),
                _ => false,
            }
        }
        for (route, schema) in &bodies {
            assert!(!arrays(schema, &json["components"]["schemas"], 0), "{route} takes an array");
        }
    }
}
