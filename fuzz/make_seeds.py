#!/usr/bin/env python3
"""Writes the seed corpora of the binary harnesses (fuzz/corpus/<name>/): short, valid
programs in each harness's input encoding (see the harness sources), so a bounded run
starts from well-formed traffic and mutates it. The JSON harnesses' seeds are copies of
files in configs/, so they follow the configs: a test runs `make_seeds.py --check`, which
writes nothing and fails, naming the file, where a seed differs from what this script
makes (a config changed and its copy did not).
Usage: make_seeds.py [--check] (from anywhere; without --check rewrites the seed files)."""
import pathlib
import sys
import json
import struct

ROOT = pathlib.Path(__file__).resolve().parent
REPO = ROOT.parent


def u8(v): return struct.pack("<B", v)
def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v)
def u64(v): return struct.pack("<Q", v)


# Every file under corpus/ is made here: PLAN maps a harness to {file name: bytes}, and
# the end of the script writes it (a file not in the plan is removed) or checks it.
PLAN = {}


def put(name, filename, data):
    PLAN.setdefault(name, {})[filename] = data


def write(name, seeds):
    for i, data in enumerate(seeds):
        put(name, f"seed{i}", data)


# copyrpc_recv: op u32 (mod 6); op 0 = imm u32, len u16, bytes.
def meta(ret, grant, count): return u64(ret) + u64(grant) + u32(count) + bytes(12)
def header(call_id, units, length): return u32(call_id) + u32(units) + u32(length)


def batch(imm, body): return u32(0) + u32(imm) + u16(len(body)) + body


request = meta(0, 0, 1) + header(5, 2, 10) + bytes(20)
response = meta(0, 64, 1) + header(0x8000_0000, 0, 8) + bytes(20)
# The longest response a 40-byte allowance admits (52 bytes): a smaller allowance in the
# call, or a longer length, makes it one the victim must refuse.
long_response = meta(0, 64, 1) + header(0x8000_0000, 0, 52) + bytes(52)
wrap = meta(0, 0, 0xFFFF_FFFF)
write("copyrpc_recv", [
    batch(2, request) + u32(2) + u32(0) + u32(3),                      # request, reply, flush
    u32(1) + u32(8) + u32(8) + u32(3) + batch(2, response) + u32(5),   # call, response
    batch(2, request) + batch(126, wrap) + batch(1, meta(32, 0, 0)),    # request, wrap, empty batch
    u32(1) + u32(0) + u32(40) + u32(3) + batch(3, long_response) + u32(5),  # call, full response
])

# shm harnesses: shape u32s, then op u32 (mod 8, flux mod 5) with its arguments.
write("shm_delegationrpc", [
    u32(1) + u32(2) + u32(1) + u32(1) + u32(1) + u32(3) + u64(7) + u32(5) + u32(6) + u64(9) + u32(7) + u32(4),
    u32(0) + u32(0) + u32(0) + u32(0) + u8(1) + u32(16) + u32(4) + u64(0xFFFF) + u32(1),  # forged tail
])
write("shm_ipc", [
    u32(1) + u32(2) + u32(0) + u32(0) + u32(1) + u8(1) + u32(3) + u64(7) + u32(5) + u8(0) + u32(6) + u64(9) + u32(4),
    u32(0) + u32(0) + u32(0) + u32(0) + u32(0) + u8(1) + u32(12) + u32(4) + u32(1 << 20) + u32(1) + u8(1),
])
write("shm_flux", [
    u32(1) + u32(1) + u32(0) + u32(1) + u32(1) + u32(1) + u32(3) + u32(1) + u32(4) + u32(0) + u32(2),
    u32(1) + u32(1) + u32(0) + u32(0) + u32(1) + u32(0) + u64(0) + u32(0x8000_0000) + u64(1) + u32(0) + u32(2),
])

# mlx5_cqe: cqe-size byte, then op u32 (mod 6).
def cqe(op_own, qpn=1, imm=0, byte_cnt=0, wqe_counter=0):
    c = bytearray(64)
    c[44:48] = struct.pack(">I", byte_cnt)
    c[48:52] = struct.pack(">I", imm)
    c[56:60] = struct.pack(">I", qpn)
    c[60:62] = struct.pack(">H", wqe_counter)
    c[63] = op_own
    return bytes(c)


def forge(cq, off, body): return u32(0) + u32(cq) + u32(off) + u32(len(body) - 1) + body


write("mlx5_cqe", [
    u8(0) + forge(0, 0, cqe(0x20)) + u32(2) + u32(4),                               # RESP_WR_IMM
    u8(0) + u32(4) + u32(10) + u8(1) + u32(0) + forge(1, 0, cqe(0x00)) + u32(3) + u32(4),  # WRITE, REQ CQE
    u8(0) + forge(0, 0, cqe(0x2C, byte_cnt=3)) + forge(0, 64, bytes(64)) + u32(2) + u32(8),  # compressed
])

for name, files in {
    "json_strict": ["configs/c1_np2.json", "configs/c2_clients1.json"],
    "sim_model": ["configs/model/c1.json"],
    "benchkv_options": ["configs/c1_np2.json", "configs/c2_clients1.json", "configs/c1_np8_staggered.json"],
}.items():
    for f in files:
        put(name, pathlib.Path(f).name, (REPO / f).read_bytes())

# A model with one fault of each kind (sim/faults.hpp).
put("sim_model", "faults.json", (json.dumps({"faults": [
    {"kind": "slow_node", "node": 1, "start_us": 100, "end_us": 300, "factor": 4},
    {"kind": "stall_daemon", "node": 0, "daemon": 0, "start_us": 5, "end_us": 6.5},
    {"kind": "link_delay", "from": 0, "to": 1, "start_us": 0, "end_us": 10, "extra_ns": 2500},
    {"kind": "packet_loss", "from": 0, "to": 1, "start_us": 0, "end_us": 50, "loss": 0.01, "timeout": 14,
     "retry_cnt": 7},
    {"kind": "qp_error", "node": 1, "peer": 0, "at_us": 42.5},
]}, indent=2) + "\n").encode())

# sim_fault: one --fault string of each kind (sim/faults.hpp).
write("sim_fault", [s.encode() for s in [
    "slow_node:node=1,start_us=100,end_us=300,factor=4",
    "stall_daemon:node=0,daemon=0,start_us=5,end_us=6.5",
    "link_delay:from=0,to=1,start_us=0,end_us=10,extra_ns=2500",
    "packet_loss:from=0,to=1,start_us=0,end_us=50,loss=0.01,timeout=14,retry_cnt=7",
    "qp_error:node=1,peer=0,at_us=42.5",
    "rnr_storm:node=1,start_us=100,end_us=300,rnr_retry=7",
]])

# step_log: the BKVSTEP1 header (np, threads per node, daemons, 0), then u32 entries.
def step_log(np, threads, daemons, steps):
    return b"BKVSTEP1" + u32(np) + u32(threads) + u32(daemons) + u32(0) + b"".join(u32(s) for s in steps)


write("step_log", [
    step_log(2, 3, 1, [0, 1, 2, 3, 4, 5, 1, 4]),
    step_log(4, 4, 2, list(range(16))),
])

# ucx_headers: a selector byte (bit 0: announcement, bit 1: rendezvous, bit 2: a length
# byte follows), then the header (AmHeader: 56 bytes; RegionAnnouncementHeader: 64) and
# the payload.
def am_header(op, length, flags=0, seq=3, imm=0):
    return (u8(op) + u8(flags) + u8(0) + u8(0) + u32(0x10) + u32(0x11) + u32(imm) + u64(0xA1B2) + u64(0xC3D4) +
            u64(seq) + u64(0x7F00_0000_1000) + u32(5) + u32(length))


def announcement(base, length, rkey, access, packed):
    return (u64(0x3159_454B_5243_5642) + u32(0x10) + u32(0x11) + u64(0xA1B2) + u64(0xC3D4) + u64(base) +
            u64(length) + u32(rkey) + u32(access) + u32(len(packed)) + u32(0) + packed)


write("ucx_headers", [
    u8(0) + am_header(2, 8, flags=1, imm=7) + bytes(range(8)),   # WRITE+IMM, ACK requested
    u8(0) + am_header(3, 64),                                    # READ request
    u8(0) + am_header(7, 4) + b"abcd",                           # READ response
    u8(0) + am_header(5, 0, seq=9),                              # ACK
    u8(1) + announcement(0x1000, 4096, 9, 6, bytes(range(16))),  # remote read and write
    u8(3) + announcement(0x1000, 4096, 9, 4, bytes(16)),         # key by rendezvous
    u8(4) + u8(40) + am_header(1, 0)[:40],                       # a short AM header
    # The packed key's limit (kMaxPackedRkey, 4096 bytes) and one byte past it: 4161 and
    # 4162 bytes of input, so the harness's max_len (8192, fuzz/CMakeLists.txt) lets a
    # bounded run mutate around it.
    u8(1) + announcement(0x1000, 4096, 9, 6, bytes(4096)),
    u8(1) + announcement(0x1000, 4096, 9, 6, bytes(4097)),
])

# ucx_am_messages: a selector byte (bits 0-1: KV request, KV response, data request; bit
# 2: rendezvous; bit 3: a length byte follows), then the message. The harness's job: 2
# ranks x 3 clients, this rank 1, 16 keys, values of at most 256 bytes.
def kv_request(client, tag, kind, rank, key, value):
    return u32(client) + u32(tag) + u8(kind) + bytes(3) + u32(rank) + u64(key) + u64(value)


def data_request(client, tag, kind, rank, key, length):
    return u32(client) + u32(tag) + u8(kind) + bytes(3) + u32(rank) + u64(key) + u64(0) + u32(length) + bytes(12)


write("ucx_am_messages", [
    u8(0) + kv_request(2, 1, 1, 1, 3, 42),                # put on this rank
    u8(0) + kv_request(5, 0, 2, 1, 3, 0),                 # get
    u8(0) + kv_request(1, 2, 2, 0, 3, 0),                 # for another rank
    u8(1) + u32(1) + u32(0) + u8(1) + bytes(15),          # response: PutOk
    u8(2) + data_request(1, 0, 1, 1, 2, 16) + bytes(range(16)),  # data put
    u8(2) + data_request(4, 1, 2, 1, 2, 256),             # data get
    u8(8) + u8(20) + kv_request(2, 1, 1, 1, 3, 42)[:20],  # a short request
    # Each limit of the job and its first value past it, one per seed with everything
    # else valid, so that a bounded run meets an off-by-one there at once: the last key
    # (15) and the first out of range (16), the last client of the job (5) and the first
    # outside it (6), a value of the largest size (256 bytes) and one byte more.
    u8(0) + kv_request(5, 3, 2, 1, 15, 0),
    u8(0) + kv_request(5, 3, 2, 1, 16, 0),
    u8(0) + kv_request(6, 3, 2, 1, 3, 0),
    u8(2) + data_request(5, 2, 2, 1, 15, 256),
    u8(2) + data_request(5, 2, 2, 1, 16, 256),
    u8(2) + data_request(6, 2, 2, 1, 2, 256),
    u8(2) + data_request(5, 3, 1, 1, 15, 256) + bytes(256),
    u8(2) + data_request(5, 3, 1, 1, 15, 257) + bytes(257),
])


def main(check):
    stale = []
    for name, files in sorted(PLAN.items()):
        d = ROOT / "corpus" / name
        on_disk = {p.name for p in d.iterdir()} if d.is_dir() else set()
        for extra in sorted(on_disk - files.keys()):
            stale.append(f"{d / extra}: not made by this script")
            if not check:
                (d / extra).unlink()
        for filename, data in files.items():
            path = d / filename
            if path.is_file() and path.read_bytes() == data:
                continue
            stale.append(f"{path}: {'differs from' if path.exists() else 'missing;'} what make_seeds.py makes")
            if not check:
                d.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    if check and stale:
        print("make_seeds.py --check: the seed corpora are stale (run fuzz/make_seeds.py):", file=sys.stderr)
        for line in stale:
            print("  " + line, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args not in ([], ["--check"]):
        print(f"make_seeds.py: unknown arguments {args}; usage: make_seeds.py [--check]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args == ["--check"]))
