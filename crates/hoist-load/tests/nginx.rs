//! `hoist load` against nginx from the distribution: exact counts, sizes of any body
//! (Content-Length, chunked, close-delimited) checked against the files and against curl,
//! TLS 1.2 with a chosen cipher, codes, reconnections, socket errors, pacing by count, JSON.
//! Nothing here asserts a timing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use hoist_load::{run, LoadError, LoadOptions, TlsVersion};
use support::{Nginx, RefusingPort, KB1, MB10};

fn opts(url: String) -> LoadOptions {
    LoadOptions {
        url,
        qps: 0.0,
        ..LoadOptions::default()
    }
}

#[test]
fn exact_count_over_keepalive_plain_http() {
    let Some(nginx) = Nginx::start("count") else {
        return;
    };
    let r = run(&LoadOptions {
        connections: 3,
        count: Some(7),
        ..opts(nginx.http("/1k"))
    })
    .unwrap();
    assert_eq!(r.histogram.count, 7);
    assert_eq!(
        r.ret_codes.clone().into_iter().collect::<Vec<_>>(),
        vec![(200, 7)]
    );
    assert_eq!(r.errors.count, 0);
    assert_eq!(r.warmup_calls, 0);
    assert_eq!(r.sockets, vec![1, 1, 1]);
    assert_eq!(r.sockets_used, 3);
    let head = r.header_sizes.min;
    assert!(
        head > 100.0 && head == r.header_sizes.max,
        "{:?}",
        r.header_sizes
    );
    assert_eq!(r.sizes.min, head + KB1 as f64);
    assert_eq!(r.sizes.max, r.sizes.min);
    assert_eq!(r.bytes_received, 7 * (head as u64 + KB1 as u64));
    assert!(r.gbps() > 0.0);
    let text = r.text_report();
    assert!(text.contains("Code 200 : 7 (100.0 %)\n"), "{text}");
    assert!(
        text.contains("Sockets used: 3 (for perfect keepalive, would be 3)\n"),
        "{text}"
    );
    assert!(text.contains("All done 7 calls (plus 0 warmup) "), "{text}");
}

#[test]
fn ten_megabytes_over_tls12_aes256_gcm() {
    let Some(nginx) = Nginx::start("tls12") else {
        return;
    };
    // The name in the URL is checked against the certificate; -resolve picks the address.
    let r = run(&LoadOptions {
        connections: 2,
        count: Some(4),
        ca_cert: Some(nginx.ca.clone()),
        tls_version: Some(TlsVersion::Tls12),
        cipher: Some("ECDHE-RSA-AES256-GCM-SHA384".into()),
        resolve: Some("127.0.0.1".parse().unwrap()),
        timeout: Duration::from_secs(30),
        ..opts(format!("https://localhost:{}/10m", nginx.tls))
    })
    .unwrap();
    assert_eq!(
        r.ret_codes.get(&200),
        Some(&4),
        "{:?} {:?}",
        r.ret_codes,
        r.first_error
    );
    let n = r.negotiated.clone().unwrap();
    assert_eq!(n.version, "TLSv1.2");
    assert_eq!(n.cipher, "ECDHE-RSA-AES256-GCM-SHA384");
    let head = r.header_sizes.min;
    assert_eq!(r.header_sizes.max, head);
    assert_eq!(r.sizes.min, head + MB10 as f64);
    assert_eq!(r.sizes.max, head + MB10 as f64);
    assert_eq!(r.bytes_received, 4 * (head as u64 + MB10 as u64));
    assert_eq!(r.sockets_used, 2);
    assert!(r
        .text_report()
        .contains("TLS: TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384\n"));
}

#[test]
fn tls13_and_certificate_checks() {
    let Some(nginx) = Nginx::start("tls13") else {
        return;
    };
    let base = LoadOptions {
        connections: 1,
        count: Some(2),
        tls_version: Some(TlsVersion::Tls13),
        ..opts(nginx.https("/1k"))
    };
    // The URL's IP is in the certificate's SANs.
    let r = run(&LoadOptions {
        ca_cert: Some(nginx.ca.clone()),
        ..base.clone()
    })
    .unwrap();
    assert_eq!(r.ret_codes.get(&200), Some(&2));
    assert_eq!(r.negotiated.unwrap().version, "TLSv1.3");
    // Without the CA the handshake fails: socket errors, counted.
    let r = run(&base).unwrap();
    assert_eq!(r.ret_codes.get(&-1), Some(&2), "{:?}", r.ret_codes);
    assert!(r.first_error.unwrap().contains("TLS"));
    // -k accepts it.
    let r = run(&LoadOptions {
        insecure: true,
        ..base
    })
    .unwrap();
    assert_eq!(r.ret_codes.get(&200), Some(&2));
}

#[test]
fn chunked_responses_match_curl_and_keep_the_connection() {
    let Some(nginx) = Nginx::start("chunked") else {
        return;
    };
    let url = nginx.http("/gzip/text");
    let (head, body) = nginx.curl_sizes(&["-H", "Accept-Encoding: gzip"], &url);
    let r = run(&LoadOptions {
        connections: 1,
        count: Some(5),
        headers: vec![("Accept-Encoding".into(), "gzip".into())],
        ..opts(url)
    })
    .unwrap();
    assert_eq!(r.ret_codes.get(&200), Some(&5), "{:?}", r.first_error);
    assert_eq!(r.header_sizes.min, head as f64);
    assert_eq!(r.sizes.min, (head + body) as f64);
    assert_eq!(r.sizes.max, (head + body) as f64);
    // Each chunked body ended exactly where nginx ended it: one connection for all.
    assert_eq!(r.sockets_used, 1);
}

#[test]
fn close_delimited_bodies_over_http10() {
    let Some(nginx) = Nginx::start("http10") else {
        return;
    };
    let url = nginx.http("/gzip/text");
    let (head, body) = nginx.curl_sizes(&["--http1.0", "-H", "Accept-Encoding: gzip"], &url);
    let r = run(&LoadOptions {
        connections: 1,
        count: Some(3),
        http10: true,
        headers: vec![("Accept-Encoding".into(), "gzip".into())],
        ..opts(url)
    })
    .unwrap();
    assert_eq!(r.ret_codes.get(&200), Some(&3), "{:?}", r.first_error);
    assert_eq!(r.sizes.min, (head + body) as f64);
    assert_eq!(r.sizes.max, (head + body) as f64);
    assert_eq!(r.sockets_used, 3);
}

#[test]
fn connection_close_responses_reconnect() {
    let Some(nginx) = Nginx::start("closing") else {
        return;
    };
    let r = run(&LoadOptions {
        connections: 1,
        count: Some(6),
        ..opts(nginx.http("/closing/1k"))
    })
    .unwrap();
    assert_eq!(r.ret_codes.get(&200), Some(&6), "{:?}", r.first_error);
    // nginx closes after every second response.
    assert_eq!(r.sockets_used, 3);
    // And -keepalive=false makes every call a new connection.
    let r = run(&LoadOptions {
        connections: 2,
        count: Some(4),
        keepalive: false,
        ..opts(nginx.http("/1k"))
    })
    .unwrap();
    assert_eq!(r.ret_codes.get(&200), Some(&4));
    assert_eq!(r.sockets_used, 4);
}

#[test]
fn socket_errors_against_a_closed_port() {
    let refusing = RefusingPort::new();
    let url = format!("http://127.0.0.1:{}/", refusing.port);
    let r = run(&LoadOptions {
        connections: 2,
        count: Some(4),
        ..opts(url.clone())
    })
    .unwrap();
    assert_eq!(
        r.ret_codes.clone().into_iter().collect::<Vec<_>>(),
        vec![(-1, 4)]
    );
    assert_eq!(r.histogram.count, 4);
    assert_eq!(r.errors.count, 4);
    assert_eq!(r.sockets_used, 4);
    assert_eq!(r.bytes_received, 0);
    assert!(r.first_error.unwrap().starts_with("connect"));
    // With warm-up calls, a failing one aborts the run...
    let err = run(&LoadOptions {
        connections: 2,
        duration: Some(Duration::from_millis(200)),
        ..opts(url.clone())
    })
    .unwrap_err();
    assert!(matches!(err, LoadError::Warmup(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with(&format!("error -1 for {url} (0 bytes)")),
        "{err}"
    );
    // ...unless allowed.
    let r = run(&LoadOptions {
        connections: 1,
        duration: Some(Duration::from_millis(200)),
        allow_initial_errors: true,
        ..opts(url)
    })
    .unwrap();
    assert!(r.histogram.count > 0);
    assert_eq!(r.ret_codes.keys().collect::<Vec<_>>(), vec![&-1]);
}

#[test]
fn status_codes_are_counted_on_a_kept_connection() {
    let Some(nginx) = Nginx::start("codes") else {
        return;
    };
    let r = run(&LoadOptions {
        connections: 1,
        count: Some(5),
        ..opts(nginx.http("/missing"))
    })
    .unwrap();
    assert_eq!(
        r.ret_codes.clone().into_iter().collect::<Vec<_>>(),
        vec![(404, 5)]
    );
    assert_eq!(r.errors.count, 5);
    assert_eq!(r.sockets_used, 1);
    // -abort-on stops the run at the first such code.
    let r = run(&LoadOptions {
        connections: 1,
        count: Some(50),
        abort_on: Some(404),
        ..opts(nginx.http("/missing"))
    })
    .unwrap();
    assert_eq!(r.histogram.count, 1);
    assert_eq!(
        r.requested_duration,
        "exactly 50 calls, interrupted after 1"
    );
}

#[test]
fn payload_makes_a_post_with_its_length() {
    let Some(nginx) = Nginx::start("post") else {
        return;
    };
    // nginx answers "<method> <content length>\n" on /echo.
    let post = run(&LoadOptions {
        connections: 1,
        count: Some(2),
        payload: b"hello".to_vec(),
        ..opts(nginx.http("/echo"))
    })
    .unwrap();
    assert_eq!(post.ret_codes.get(&200), Some(&2));
    assert_eq!(
        post.sizes.min - post.header_sizes.min,
        "POST 5\n".len() as f64
    );
    let get = run(&LoadOptions {
        connections: 1,
        count: Some(1),
        ..opts(nginx.http("/echo"))
    })
    .unwrap();
    assert_eq!(get.sizes.min - get.header_sizes.min, "GET \n".len() as f64);
}

#[test]
fn paced_runs_make_the_exact_count_and_record_pauses() {
    let Some(nginx) = Nginx::start("paced") else {
        return;
    };
    let r = run(&LoadOptions {
        connections: 2,
        count: Some(6),
        qps: 200.0,
        uniform: true,
        jitter: true,
        ..opts(nginx.http("/1k"))
    })
    .unwrap();
    assert_eq!(r.histogram.count, 6);
    assert_eq!(r.requested_qps, "200");
    // Three calls per connection: a pause after each of the first two.
    assert_eq!(r.sleep_times.as_ref().unwrap().count(), 4);
    assert!(r.text_summary().contains("Uniform: true, Jitter: true"));
}

#[test]
fn timed_runs_warm_up_each_connection_and_can_be_stopped() {
    let Some(nginx) = Nginx::start("timed") else {
        return;
    };
    let r = run(&LoadOptions {
        connections: 2,
        duration: Some(Duration::from_millis(300)),
        ..opts(nginx.http("/1k"))
    })
    .unwrap();
    assert!(r.histogram.count > 0);
    assert_eq!(r.warmup_calls, 2);
    assert_eq!(r.ret_codes.keys().collect::<Vec<_>>(), vec![&200]);
    assert_eq!(r.requested_duration, "300ms");
    // No duration: runs until the stop flag is set.
    let o = LoadOptions {
        connections: 1,
        duration: None,
        ..opts(nginx.http("/1k"))
    };
    let stop = o.stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
    });
    let r = run(&o).unwrap();
    stopper.join().unwrap();
    assert!(r.histogram.count > 0);
    assert_eq!(r.requested_duration, "until stop");
}

#[test]
fn json_has_fortio_fields_in_order() {
    let Some(nginx) = Nginx::start("json") else {
        return;
    };
    let url = nginx.http("/1k");
    let r = run(&LoadOptions {
        connections: 2,
        count: Some(10),
        labels: Some("run A".into()),
        ..opts(url.clone())
    })
    .unwrap();
    let text = serde_json::to_string_pretty(&r.to_json()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let wanted = [
        "RunType",
        "Labels",
        "StartTime",
        "RequestedQPS",
        "RequestedDuration",
        "ActualQPS",
        "ActualDuration",
        "NumThreads",
        "Version",
        "DurationHistogram",
        "ErrorsDurationHistogram",
        "RetCodes",
        "URL",
        "NumConnections",
        "Sizes",
        "HeaderSizes",
        "Sockets",
        "SocketCount",
        "Gbps",
    ];
    let positions: Vec<usize> = wanted
        .iter()
        .map(|w| {
            keys.iter()
                .position(|k| k == w)
                .unwrap_or_else(|| panic!("no {w}"))
        })
        .collect();
    assert!(positions.windows(2).all(|p| p[0] < p[1]), "{keys:?}");
    assert_eq!(v["RunType"], "HTTP");
    assert_eq!(v["Labels"], "run A");
    assert_eq!(v["RequestedQPS"], "max");
    assert_eq!(v["RequestedDuration"], "exactly 10 calls");
    assert_eq!(v["NumThreads"], 2);
    assert_eq!(v["URL"], url);
    assert_eq!(v["RetCodes"]["200"], 10);
    assert_eq!(v["SocketCount"], 2);
    assert_eq!(v["Sockets"], serde_json::json!([1, 1]));
    let h = &v["DurationHistogram"];
    let hkeys: Vec<&str> = h.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(
        hkeys,
        vec![
            "Count",
            "Min",
            "Max",
            "Sum",
            "Avg",
            "StdDev",
            "Data",
            "Percentiles"
        ]
    );
    assert_eq!(h["Count"], 10);
    assert_eq!(h["Percentiles"].as_array().unwrap().len(), 5);
    assert_eq!(h["Percentiles"][4]["Percentile"], 99.9);
    let buckets = h["Data"].as_array().unwrap();
    let total: u64 = buckets.iter().map(|b| b["Count"].as_u64().unwrap()).sum();
    assert_eq!(total, 10);
    assert_eq!(buckets.last().unwrap()["Percent"], 100.0);
    // No errors: no data, no percentiles.
    assert_eq!(v["ErrorsDurationHistogram"]["Count"], 0);
    assert!(v["ErrorsDurationHistogram"]["Data"].is_null());
    assert!(v["ErrorsDurationHistogram"].get("Percentiles").is_none());
    assert_eq!(v["Sizes"]["Count"], 10);
    assert!(v["ActualDuration"].as_u64().unwrap() > 0);
    assert!(v["Gbps"].as_f64().unwrap() > 0.0);
    assert_eq!(v["BytesReceived"].as_u64().unwrap(), r.bytes_received);
    assert!(v["StartTime"].as_str().unwrap().ends_with('Z'));
}
