#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/: a few valid inputs per target, so the fuzzers
start from accepted messages instead of finding JSON by chance. Run from fuzz/.

Not here: fuzz/seeds/agent_session/, byte streams made with netrig's own
encoders by `netrig_fuzz::agent_session::seeds()` and written by
`NETRIG_WRITE_SEEDS=1 cargo test -p netrig-fuzz --test seeds` (which checks
they are current); fuzz/seeds/initiate_result/, agents' answers to
`initiate` captured from `netrig mesh` runs (a tcp-stream and a tcp-rr result,
a refusal), kept as captured; fuzz/seeds/dns_answer/, real answers of a dnsmasq
written by `NETRIG_WRITE_SEEDS=1 cargo test -p netrig-fleet --test dnsmasq`;
fuzz/regressions/<target>/, minimized inputs of crashes found and fixed, kept
as found."""
import base64, json, os, struct

def put(target, name, data):
    d = os.path.join("seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# Version 3's spec: the common part, and the kind's own options under
# "test", tagged with its kind. Options at their defaults stay off the wire.
def spec(test, **kw):
    s = {"test": test, "limit": {"duration": {"seconds": 10.0}}, "flows": 2, "measure_cpu": True}
    s.update(kw)
    return s
def stream(kind, **kw):
    return dict({"kind": kind, "message_size": 1024, "recv_size": 1024}, **kw)
def txns(request_size=1, response_size=1, burst=1, **open_loop):
    load = {"open": open_loop} if open_loop else {"closed": {"burst": burst}}
    return {"request_size": request_size, "response_size": response_size, "load": load}

specs = {
    "tcp-stream": spec(stream("tcp-stream", pace={"rate_bps": 1000000, "pacing_us": 100},
                              tcp={"nodelay": True}),
                       interval_s=1.0, omit_s=2.0),
    "tcp-maerts-bytes": spec(stream("tcp-maerts", zerocopy=True), limit={"bytes": {"bytes": 1000000}},
                             measure_cpu=False),
    "tcp-bidir": spec(stream("tcp-bidir", tcp={"congestion": "cubic"}), workers=2, remote_cpus=[0, 1],
                      remote={"sndbuf": 65536, "rcvbuf": 131072, "tos": 184, "priority": 3,
                              "max_pacing_rate_bps": 10**9}),
    "tcp-rr": spec({"kind": "tcp-rr", "transactions": txns(64, 1024, burst=8),
                    "tcp": {"nodelay": True, "congestion": "bbr"}}),
    "tcp-rr-open": spec({"kind": "tcp-rr", "transactions": txns(rate=1000.0, poisson=True, spin_us=50)}),
    "tcp-crr": spec({"kind": "tcp-crr", "transactions": txns(burst=4), "timeout_s": 0.5}),
    "tcp-crr-open": spec({"kind": "tcp-crr", "transactions": txns(100, 200, rate=500.0),
                          "tcp": {"nodelay": True}}),
    "udp-stream": spec({"kind": "udp-stream", "datagram_size": 1472, "reverse": True, "no_gso": True,
                        "pace": {"rate_bps": 100000000}}),
    "udp-stream-bytes": spec({"kind": "udp-stream", "datagram_size": 28}, limit={"bytes": {"bytes": 99999}}),
    "udp-rr": spec({"kind": "udp-rr", "transactions": txns(100, 200), "timeout_s": 2.0}),
    "udp-rr-open": spec({"kind": "udp-rr", "transactions": txns(rate=10000.0, spin_us=0)}),
}
for name, s in specs.items():
    put("spec", name, json.dumps(s))
    put("message", "test_request-" + name, json.dumps({"type": "test_request", "spec": s}))

# Protocol version 4's authentication: nonces, keys and signatures as base64.
def b64(n, fill):
    return base64.b64encode(bytes([fill]) * n).decode()
nonce, key, sig = b64(32, 1), b64(32, 2), b64(64, 3)
client_msgs = [{"type": "hello", "software": "0.1.0", "auth": {"nonce": nonce}}, {"type": "go"},
               {"type": "abort", "reason": "x"}, {"type": "bye"}]
put("message", "hello-key",
    json.dumps({"type": "hello", "software": "0.1.0", "auth": {"nonce": nonce, "client_key": key, "signature": sig}}))
put("message", "test_request-signed",
    json.dumps({"type": "test_request", "spec": specs["tcp-rr"], "auth": {"counter": 0, "signature": sig}}))
# Protocol 8's initiate: a signed request to run a test against another agent, with the
# client's own end.
put("message", "initiate-client-end",
    json.dumps({"type": "initiate", "request": {"target": "10.0.0.2:6387", "spec": specs["tcp-stream"],
                "start_at_ns": 1700000000000000000,
                "client": {"socket": {"sndbuf": 65536, "rcvbuf": 65536, "tos": 40}, "mss": 1000}},
                "auth": {"counter": 0, "signature": sig}}))
limits = {"max_sessions": 64, "max_flows": 10000, "max_duration_s": 3600, "max_message_size": 16777216,
          "setup_timeout_s": 30, "max_workers": 64, "max_buffer_bytes": 1073741824}
agent_msgs = [
    {"type": "welcome", "version": 4, "software": "0.1.0", "limits": limits,
     "auth": {"required": False, "nonce": nonce}},
    {"type": "hello_accepted"},
    {"type": "version_mismatch", "agent_min": 1, "agent_max": 1, "software": "0.0.1"},
    {"type": "busy", "reason": "64 sessions"},
    {"type": "test_accepted", "cookie": "00112233445566778899aabbccddeeff", "warnings": ["w"]},
    {"type": "test_rejected", "reason": "-l/--length 6: the agent allows at most 5 seconds"},
    {"type": "data_ready"},
    {"type": "interval", "sample": {"index": 0, "start_s": 0.0, "end_s": 0.5, "ids": [0, 1],
                                    "bytes": [10, 20], "tcp_info": [None, None], "transactions": [1, 2]}},
    {"type": "results", "report": {"flows": [], "window_s": 1.0, "warnings": []}},
    {"type": "error", "message": "gave up"},
]
for m in client_msgs + agent_msgs:
    put("message", m["type"], json.dumps(m))
# Protocol 6: the watch of the agent's host, and its answer.
pe = {"peak": 2, "end": 1}
cpu = {"busy_pct": 50.0, "user_pct": 20.0, "nice_pct": 0.0, "system_pct": 20.0, "irq_pct": 0.0,
       "softirq_pct": 10.0, "steal_pct": 0.0, "iowait_pct": 0.0, "cpus": 2, "busiest_cpu": 1,
       "busiest_cpu_pct": 90.0, "elapsed_cpu_s": 20.0, "busy_cpu_s": 10.0}
host_view = {"window_s": 10.0, "samples": 9, "limit_s": None, "cpu": cpu,
             "busiest_cpu": {"cpu": 1, "busy_pct": 90.0, "user_pct": 30.0, "system_pct": 30.0, "irq_pct": 0.0,
                             "softirq_pct": 30.0, "iowait_pct": 0.0, "steal_pct": 0.0},
             "cpu_withheld": None,
             "counters": {"TcpExt.ListenOverflows": 3412, "TcpExt.ListenDrops": 3500, "Tcp.RetransSegs": 9,
                          "Tcp.OutSegs": 1000, "TcpExt.SyncookiesSent": 4},
             "counters_withheld": None,
             "conntrack": {"start": 1, "end": 60000, "peak": 65000, "max": 65536, "drop": 12, "early_drop": 0,
                           "insert_failed": 1, "stat_withheld": None},
             "conntrack_withheld": None,
             "sockets": {"established": pe, "syn_recv": pe, "time_wait": {"peak": 130000, "end": 1},
                         "close_wait": pe, "fin_wait2": pe, "sockstat_time_wait": pe, "orphan": None,
                         "partial": True},
             "sockets_withheld": None,
             "sysctls": {"net.core.somaxconn": 4096, "net.ipv4.tcp_max_tw_buckets": 131072}}
for m in [{"type": "watch_start"}, {"type": "watch_end"}, {"type": "watch_started", "limit_s": 3630},
          {"type": "watch_rejected", "reason": "one at a time"}, {"type": "host_view", "view": host_view}]:
    put("message", m["type"], json.dumps(m))
put("message", "host_view-withheld", json.dumps({"type": "host_view", "view": dict(
    host_view, cpu=None, busiest_cpu=None, cpu_withheld="cannot read /proc/stat", conntrack=None,
    conntrack_withheld="nf_conntrack is not loaded", limit_s=3630.0)}))
put("message", "welcome-required",
    json.dumps({"type": "welcome", "version": 4, "software": "0.1.0", "limits": limits,
                "auth": {"required": True, "nonce": nonce, "agent_key": key}}))
put("message", "hello_accepted-signed", json.dumps({"type": "hello_accepted", "signature": sig}))

def frame(m):
    b = json.dumps(m).encode()
    return struct.pack(">I", len(b)) + b
# frame: 2 bytes limit (minus one), 1 byte chunk size, then frames
allframes = b"".join(frame(m) for m in client_msgs + agent_msgs)
put("frame", "all-in-one", struct.pack(">HB", 0xffff, 255) + allframes)
put("frame", "byte-by-byte", struct.pack(">HB", 0xffff, 1) + frame({"type": "go"}) + frame({"type": "bye"}))
put("frame", "over-limit", struct.pack(">HB", 15, 7) + frame({"type": "go"}) + frame(agent_msgs[0]))
put("frame", "test_request", struct.pack(">HB", 0xffff, 100) + frame({"type": "test_request", "spec": specs["tcp-rr"]}))

put("preamble", "v3", b"NRGC\x00\x03\x00\x03")
put("preamble", "v4", b"NRGC\x00\x04\x00\x04")
put("preamble", "v2-4", b"NRGC\x00\x02\x00\x04")
put("preamble", "v1-9", b"NRGC\x00\x01\x00\x09")
put("preamble", "cookie", b"00112233445566778899aabbccddeeff")
put("preamble", "cookie-json", b'"00112233445566778899AABBCCDDEEFF"')
put("data_hello", "hello", b"NRGD\x00\x04\x00\x00" + bytes(range(16)) + b"\x00\x00\x00\x07\x00\x00\x00\x00")
put("data_hello", "ack", b"NRGA\x00\x04\x00\x00" + bytes(range(16)) + b"\x00\x00\x00\x07\x00\x00\x00\x00")
put("data_hello", "hello-v3", b"NRGD\x00\x03\x00\x00" + bytes(range(16)) + b"\x00\x00\x00\x07\x00\x00\x00\x00")

# latency_histogram: HdrHistogram V2 (1 ns ..= 100 s, 3 digits), see netrig-metrics' latency.rs.
def zz(n):
    return ((n << 1) ^ (n >> 63)) & (2**64 - 1)
def varint(v):
    out = bytearray()
    while True:
        if v >> 7 == 0:
            out.append(v)
            return bytes(out)
        out.append((v & 0x7f) | 0x80)
        v >>= 7
def hist(counts, clamped=0):
    payload = b"".join(varint(zz(c)) for c in counts)
    b = struct.pack(">IIII", 0x1c849313, len(payload), 0, 3) + struct.pack(">QQd", 1, 100_000_000_000, 1.0)
    b += payload
    if clamped:
        b += b"NRcl" + struct.pack(">Q", clamped)
    return b
import base64
put("latency_histogram", "empty", hist([0]))
put("latency_histogram", "some", hist([0, 3, -5, 7, 1]))
put("latency_histogram", "clamped", hist([0, 2, -100, 4], clamped=1))
put("latency_histogram", "base64", base64.b64encode(hist([0, 1, 2, -3, 9])))

# The HTTP server's request heads: byte 0 the head bound, bytes 1-2 the splits' seed, then the stream.
put("metrics_request", "prometheus", b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nUser-Agent: Prometheus/2.42.0\r\nAccept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\nAccept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n")
put("metrics_request", "curl", b"GET /metrics?name[]=x HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n")
put("metrics_request", "refusals", b"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
put("http_request", "get", b"\x20\x01\x02GET /bytes/1024 HTTP/1.1\r\nHost: x\r\n\r\n")
put("http_request", "pipelined", b"\x40\x13\x37" + b"GET /bytes/3 HTTP/1.1\r\n\r\nHEAD /bytes/70000?delay_ms=5 HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /.netrig/stats HTTP/1.1\r\nConnection: close\r\n\r\n")
put("http_request", "refusals", b"\x00\x00\x01GET /bytes/99999999 HTTP/1.1\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
put("http_request", "http2", b"\x10\x22\x33PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
put("http_request", "long-line", b"\x00\x09\x09GET /" + b"a" * 400)

# tcp-rr's message stamps: u16 message size, u64 receive time since the reference (both LE), then the reads.
def stamped(size, stamps):
    return b"".join(struct.pack("<Q", s) + b"\x5a" * (size - 8) for s in stamps)
put("msg_stamp", "64-bytes", struct.pack("<HQ", 64, 5_000_000) + stamped(64, [1_000_000, 2_000_000, 4_999_000]))
put("msg_stamp", "8-bytes", struct.pack("<HQ", 8, 10) + stamped(8, [1, 2, 3, 2**63]))
put("msg_stamp", "1-byte", struct.pack("<HQ", 1, 0) + b"\x01" * 20)

# iperf3: the bytes of a real iperf3 3.21 test (and 3.12's parameters), as
# netrig_proto's tests hold them.
rec = "../crates/netrig-proto/src/iperf3/recorded/"
def rd(name):
    with open(rec + name, "rb") as f:
        return f.read()
for name in ["params-3.21-tcp.json", "params-3.21-udp-reverse.json", "params-3.12-tcp-reverse.json"]:
    put("iperf3_params", name, rd(name))
for name in ["results-3.21-client.json", "results-3.21-server.json"]:
    put("iperf3_results", name, rd(name))
framed = lambda j: struct.pack(">I", len(j)) + j
# The agent's side (first byte odd): the client's parameters, TEST_END, its results, IPERF_DONE.
put("iperf3_control", "server-side", b"\x01" + framed(rd("params-3.21-tcp.json")) + b"\x04"
    + framed(rd("results-3.21-client.json")) + b"\x10")
# The client's side (first byte even): the server's states, its results, DISPLAY_RESULTS.
put("iperf3_control", "client-side", b"\x00" + b"\x09\x0a\x01\x02\x0d" + framed(rd("results-3.21-server.json")) + b"\x0e")
put("iperf3_control", "server-error", b"\x00" + b"\xfe" + struct.pack(">ii", 142, 0))
