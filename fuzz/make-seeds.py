#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# fuzz/make-seeds.py: writes the seed corpus (fuzz/corpus/<target>/) from the wire formats
# described in fuzz/exchange_message_target.hpp and include/ibv/net/*.hpp. Run once by hand when
# the formats change (python3, not needed by the build); the files it writes are committed.
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


# --- exchanger ------------------------------------------------------------------------------
HELLO, DATA = 1, 2
MAX = {"1MiB": 0, "1": 1, "8": 2, "20": 3, "28": 4, "1024": 5, "64KiB": 6, "16MiB": 7}
TYPES = ["node_endpoint", "endpoint", "remote_region", "vec_endpoint", "vec_region", "vec_string",
         "vec_vec_u64", "u32", "u64", "u16", "string", "bytes", "vec_node_endpoint", "u8"]


def control(world, receiver, accepted=False, peer_offset=0, sequence=0, max_sel=0, ptype=0,
            chunking=0, messages=1):
    return bytes([world - 2, receiver, (0x80 if accepted else 0) | peer_offset, sequence, max_sel,
                  ptype, chunking, messages - 1])


def header(kind, sender, world, sequence, length, magic=b"IBVX", version=1, reserved=0):
    return magic + bytes([version, kind]) + struct.pack(">HIIII", reserved, sender, world,
                                                        sequence, length)


def message(sender, world, sequence, payload):
    return header(DATA, sender, world, sequence, len(payload)) + payload


def endpoint(qpn=0x12a, lid=0, psn=0x3f2a1b, gid=bytes(10) + b"\xff\xff\x0a\x00\x00\x02"):
    return bytes([1, 0]) + struct.pack(">HII", lid, qpn, psn) + gid


def region(address=0x7F0000001000, length=4096, rkey=0x77):
    return struct.pack(">QQI", address, length, rkey)


def node_endpoint(rank, world):
    eps = b"".join(bytes([1]) + bytes(27) if p == rank else endpoint(0x100 + p, 0, 0x200 + p)
                   for p in range(world))
    return bytes([1, 0, 0, 0]) + struct.pack(">II", rank, world) + region() + eps


def ud_address(qpn=0x33, qkey=0x11111111, lid=0, mtu_code=3,
               gid=bytes(10) + b"\xff\xff\x0a\x00\x00\x02"):
    return bytes([1, mtu_code]) + struct.pack(">HII", lid, qpn, qkey) + gid


def node_endpoint_v2(rank, world, flags=1, version=2):
    """Version 2: flag bit 0 says a UdAddress (NodeBuilder::datagrams) follows the region; flag
    bit 1 a control part: the control block after that (address), and world control queue pair
    endpoints after the queue pairs."""
    eps = b"".join(bytes([1]) + bytes(27) if p == rank else endpoint(0x100 + p, 0, 0x200 + p)
                   for p in range(world))
    control_eps = b"".join(bytes([1]) + bytes(27) if p == rank else
                           endpoint(0x500 + p, 0, 0x600 + p) for p in range(world))
    return (bytes([version, flags, 0, 0]) + struct.pack(">II", rank, world) + region() +
            (ud_address() if flags & 1 else b"") +
            (region(0x7F0000200000, 256, 0x99) if flags & 2 else b"") + eps +
            (control_eps if flags & 2 else b""))


def vector(elements):
    return struct.pack(">I", len(elements)) + b"".join(struct.pack(">I", len(e)) + e
                                                       for e in elements)


PAYLOADS = {
    "node_endpoint": node_endpoint(1, 3),
    "endpoint": endpoint(),
    "remote_region": region(),
    "vec_endpoint": vector([endpoint(1, 2, 3), endpoint(0xFFFFFF, 0xFFFF, 0xFFFFFF)]),
    "vec_region": vector([region(), region(0, 0, 0)]),
    "vec_string": vector([b"", b"node01", "r\u00e9seau".encode()]),
    "vec_vec_u64": vector([vector([struct.pack(">Q", 1), struct.pack(">Q", 2**64 - 1)]),
                           vector([])]),
    "u32": struct.pack(">I", 0xDEADBEEF),
    "u64": struct.pack(">Q", 2**63),
    "u16": struct.pack(">H", 18515),
    "string": b"hello, rank 0",
    "bytes": bytes(range(16)),
    "vec_node_endpoint": vector([node_endpoint(0, 2), node_endpoint(1, 2)]),
    "u8": b"\x2a",
}


def exchanger_seeds():
    t = "exchange_message"
    # Rank 0 of 3 dialled rank 1: one valid data message of every payload type.
    for ptype, name in enumerate(TYPES):
        payload = PAYLOADS[name]
        write(t, f"data-{name}", control(3, 0, ptype=ptype) + message(1, 3, 0, payload))
    # Rank 2 of 3 accepted a connection: hello from rank 1, then its data (NodeEndpoint).
    hello = header(HELLO, 1, 3, 0, 0)
    write(t, "hello-then-data", control(3, 2, accepted=True) + hello +
          message(1, 3, 0, node_endpoint(1, 3)))
    # Byte by byte and in odd chunks, as a slow TCP peer would deliver it.
    write(t, "hello-then-data-chunked", control(3, 2, accepted=True, chunking=3) + hello +
          message(1, 3, 0, PAYLOADS["endpoint"]))
    write(t, "data-byte-by-byte", control(2, 0, chunking=24, ptype=1) +
          message(1, 2, 0, PAYLOADS["endpoint"]))
    # Later exchanges reuse the connection: sequence numbers 5, 6, 7.
    write(t, "three-exchanges", control(4, 1, peer_offset=1, sequence=5, ptype=7, messages=3) +
          b"".join(message(3, 4, 5 + i, struct.pack(">I", i)) for i in range(3)))
    # Edge cases that are valid: empty payload, payload exactly at the maximum.
    write(t, "empty-payload", control(2, 0, ptype=11) + message(1, 2, 0, b""))
    write(t, "payload-at-max", control(2, 0, max_sel=MAX["28"], ptype=1) +
          message(1, 2, 0, PAYLOADS["endpoint"]))
    # Invalid: every rule of the header, and truncations.
    write(t, "bad-payload-over-max", control(2, 0, max_sel=MAX["20"], ptype=1) +
          message(1, 2, 0, PAYLOADS["endpoint"]))
    write(t, "bad-http-request", control(2, 0) + b"GET / HTTP/1.1\r\nHost: node01\r\n\r\n")
    write(t, "bad-magic", control(2, 0) + header(DATA, 1, 2, 0, 0, magic=b"IBVY"))
    write(t, "bad-version", control(2, 0) + header(DATA, 1, 2, 0, 0, version=2))
    write(t, "bad-kind", control(2, 0) + header(3, 1, 2, 0, 0))
    write(t, "bad-hello-on-data", control(2, 0) + header(HELLO, 1, 2, 0, 0))
    write(t, "bad-data-before-hello", control(2, 1, accepted=True) + message(0, 2, 0, b""))
    write(t, "bad-reserved", control(2, 0) + header(DATA, 1, 2, 0, 0, reserved=1))
    write(t, "bad-world-size", control(2, 0) + header(DATA, 1, 3, 0, 0))
    write(t, "bad-rank-past-world", control(2, 0) + header(DATA, 2, 2, 0, 0))
    write(t, "bad-other-sender", control(4, 0, peer_offset=0) + header(DATA, 2, 4, 0, 0))
    write(t, "bad-hello-own-rank", control(3, 1, accepted=True) + header(HELLO, 1, 3, 0, 0))
    write(t, "bad-hello-higher-rank", control(3, 1, accepted=True) + header(HELLO, 2, 3, 0, 0))
    write(t, "bad-hello-with-payload", control(3, 2, accepted=True) + header(HELLO, 0, 3, 0, 4) +
          b"abcd")
    write(t, "bad-hello-sequence", control(3, 2, accepted=True) + header(HELLO, 0, 3, 1, 0))
    write(t, "bad-sequence", control(2, 0, sequence=3) + header(DATA, 1, 2, 4, 0))
    write(t, "truncated-header", control(2, 0) + header(DATA, 1, 2, 0, 4)[:13])
    write(t, "truncated-payload", control(2, 0, ptype=1) + message(1, 2, 0, endpoint())[:40])
    write(t, "huge-length-16MiB-max", control(2, 0, max_sel=MAX["16MiB"], ptype=11) +
          header(DATA, 1, 2, 0, 0xFFFFFF))
    # Payloads that must not decode.
    write(t, "bad-endpoint-version", control(2, 0, ptype=1) +
          message(1, 2, 0, b"\x02" + endpoint()[1:]))
    write(t, "bad-endpoint-qpn", control(2, 0, ptype=1) +
          message(1, 2, 0, endpoint(qpn=0x1000000)))
    write(t, "bad-region-overflow", control(2, 0, ptype=2) +
          message(1, 2, 0, region(2**64 - 16, 4096, 1)))
    write(t, "bad-node-endpoint-count", control(2, 0, ptype=0) +
          message(1, 2, 0, node_endpoint(1, 3)[:-28]))
    write(t, "bad-node-endpoint-rank", control(2, 0, ptype=0) +
          message(1, 2, 0, bytes([1, 0, 0, 0]) + struct.pack(">II", 3, 3) + region() +
                  3 * endpoint()))
    # NodeEndpoint version 2 (a datagram address after the region), and what must not decode.
    write(t, "data-node-endpoint-v2", control(3, 0, ptype=0) +
          message(1, 3, 0, node_endpoint_v2(1, 3)))
    write(t, "bad-node-endpoint-v2-no-flag", control(3, 0, ptype=0) +
          message(1, 3, 0, node_endpoint_v2(1, 3, flags=0)))
    write(t, "bad-node-endpoint-v2-flags", control(3, 0, ptype=0) +
          message(1, 3, 0, node_endpoint_v2(1, 3, flags=5)))
    # With a control part (flag bit 1) besides the datagram address.
    write(t, "data-node-endpoint-v2-control", control(3, 0, ptype=0) +
          message(1, 3, 0, node_endpoint_v2(1, 3, flags=3)))
    write(t, "bad-node-endpoint-v1-with-flag", control(3, 0, ptype=0) +
          message(1, 3, 0, node_endpoint_v2(1, 3, version=1)))
    write(t, "bad-vector-count", control(2, 0, ptype=5) +
          message(1, 2, 0, struct.pack(">I", 0xFFFFFFFF) + b"abcd"))
    write(t, "bad-vector-length", control(2, 0, ptype=5) +
          message(1, 2, 0, struct.pack(">II", 1, 0xFFFFFFF0) + b"abcd"))
    write(t, "bad-vector-leftover", control(2, 0, ptype=5) +
          message(1, 2, 0, vector([b"a"]) + b"!"))
    write(t, "bad-u32-size", control(2, 0, ptype=7) + message(1, 2, 0, b"\x01\x02\x03"))


# --- network config -------------------------------------------------------------------------
def host(rank, hostname, port=18515, ibdev="rxe0", **extra):
    entry = {"hostname": hostname, "port": port, "ibdev": ibdev, "rankid": rank}
    entry.update(extra)
    return entry


def config_seeds():
    t = "network_config"
    write(t, "one-host", json.dumps({"hosts": [host(0, "localhost")]}))
    write(t, "two-hosts", json.dumps({"hosts": [host(0, "10.0.0.1"), host(1, "10.0.0.2")]},
                                     indent=2))
    write(t, "four-hosts-unordered-comments", json.dumps({"hosts": [
        host(2, "node03", ibdev="mlx5_0", comment="rack 3"),
        host(0, "node01", ibdev="mlx5_0"),
        host(3, "node03", port=18516, ibdev="mlx5_1", comment=""),
        host(1, "node02", ibdev="mlx5_0", comment="r\u00e9seau \u2603 \"quoted\" \\ \n")]},
        ensure_ascii=False))
    write(t, "ipv6-and-port-bounds", json.dumps({"hosts": [host(0, "fe80::1", port=1),
                                                          host(1, "[::1]", port=65535)]}))
    write(t, "comment-with-nul", '{"hosts":[{"hostname":"a","port":1,"ibdev":"b","rankid":0,'
                                 '"comment":"x\\u0000y\\ud83d\\ude00"}]}')
    write(t, "bad-not-json", "hosts: [node01]")
    write(t, "bad-truncated", '{"hosts":[{"hostname":"a","port":1')
    write(t, "bad-array", "[1, 2, 3]")
    write(t, "bad-no-hosts", "{}")
    write(t, "bad-empty-hosts", '{"hosts":[]}')
    write(t, "bad-unknown-top-field", '{"hosts":[],"version":1}')
    write(t, "bad-typo-rankId", json.dumps({"hosts": [{"hostname": "a", "port": 1, "ibdev": "b",
                                                       "rankId": 0}]}))
    write(t, "bad-port-zero", json.dumps({"hosts": [host(0, "a", port=0)]}))
    write(t, "bad-port-too-big", json.dumps({"hosts": [host(0, "a", port=65536)]}))
    write(t, "bad-port-fraction", '{"hosts":[{"hostname":"a","port":1.5,"ibdev":"b","rankid":0}]}')
    write(t, "bad-port-string", json.dumps({"hosts": [host(0, "a", port="18515")]}))
    write(t, "bad-negative-rank", json.dumps({"hosts": [host(-1, "a")]}))
    write(t, "bad-huge-rank", '{"hosts":[{"hostname":"a","port":1,"ibdev":"b",'
                              '"rankid":18446744073709551616}]}')
    write(t, "bad-duplicate-rank", json.dumps({"hosts": [host(0, "a"), host(0, "b")]}))
    write(t, "bad-missing-rank", json.dumps({"hosts": [host(0, "a"), host(2, "b")]}))
    write(t, "bad-same-listener", json.dumps({"hosts": [host(0, "Node01"), host(1, "node01")]}))
    write(t, "bad-empty-hostname", json.dumps({"hosts": [host(0, "")]}))
    write(t, "bad-blank-in-ibdev", json.dumps({"hosts": [host(0, "a", ibdev="mlx5 0")]}))
    write(t, "bad-entry-not-object", '{"hosts":[42]}')
    write(t, "bad-duplicate-key", '{"hosts":[{"hostname":"a","hostname":"b","port":1,'
                                  '"ibdev":"c","rankid":0}]}')
    write(t, "bad-deep-nesting", '{"hosts":' + "[" * 2000 + "]" * 2000 + "}")
    write(t, "bad-invalid-utf8", b'{"hosts":[{"hostname":"\xff","port":1,"ibdev":"b","rankid":0}]}')


if __name__ == "__main__":
    exchanger_seeds()
    config_seeds()
