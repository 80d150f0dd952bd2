"""Small, dependency-free helpers for the switch_emu integration tests: a struct-based pcap
reader/writer (scapy is too slow for 100k packets), Ethernet/IPv4/UDP frame builders, and the
flow hash computed independently of the switch (pure Python CRC-32C and CRC-32 tables).

The hash follows DESIGN.md and dataplane/forwarding/flow_hasher.h: the key is
    src IP (4) | dst IP (4) | src port (2) | dst port (2) | protocol (1) [| BTH DestQP (3)]
in network order; crc32c is DPDK's rte_hash_crc (reflected Castagnoli 0x82F63B78, register
initialised to the seed, no final inversion); crc32 is zlib's crc32(seed, key)."""
import struct

PCAP_USEC = 0xA1B2C3D4
PCAP_NSEC = 0xA1B23C4D
LINKTYPE_ETHERNET = 1

ETH_IPV4 = 0x0800
ETH_ARP = 0x0806
ETH_IPV6 = 0x86DD
ETH_VLAN = 0x8100
PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17


# ---------------------------------------------------------------------------------------------
# pcap files

def write_pcap(path, frames, nsec=False, start_ns=1_000_000_000, gap_ns=1000):
    """Writes `frames` (an iterable of bytes) as a classic little-endian pcap, Ethernet link
    type, timestamps start_ns + i * gap_ns. Returns the number of frames written."""
    n = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", PCAP_NSEC if nsec else PCAP_USEC, 2, 4, 0, 0, 262144,
                            LINKTYPE_ETHERNET))
        hdr = struct.Struct("<IIII")
        for i, frame in enumerate(frames):
            t = start_ns + i * gap_ns
            frac = t % 1_000_000_000 if nsec else (t % 1_000_000_000) // 1000
            f.write(hdr.pack(t // 1_000_000_000, frac, len(frame), len(frame)))
            f.write(frame)
            n += 1
    return n


def read_pcap(path):
    """Every frame of a classic pcap file (either byte order, µs or ns timestamps), as bytes.
    A record cut short by a truncated capture (caplen < len) is returned as captured."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError(f"{path}: {len(data)} bytes, too short for a pcap header")
    magic_le = struct.unpack_from("<I", data, 0)[0]
    if magic_le in (PCAP_USEC, PCAP_NSEC):
        endian = "<"
    elif struct.unpack_from(">I", data, 0)[0] in (PCAP_USEC, PCAP_NSEC):
        endian = ">"
    else:
        raise ValueError(f"{path}: not a pcap file (magic {data[:4].hex()})")
    linktype = struct.unpack_from(endian + "I", data, 20)[0]
    if linktype != LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: link type {linktype}, expected Ethernet")
    rec = struct.Struct(endian + "IIII")
    frames = []
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = rec.unpack_from(data, off)
        off += 16
        if off + caplen > len(data):
            raise ValueError(f"{path}: record at {off - 16} runs past the end of the file")
        frames.append(data[off:off + caplen])
        off += caplen
    if off != len(data):
        raise ValueError(f"{path}: {len(data) - off} trailing bytes")
    return frames


# ---------------------------------------------------------------------------------------------
# checksums and frames

def inet_checksum(data):
    """RFC 1071 one's complement checksum of `data`."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip_bytes(dotted):
    return bytes(int(x) for x in dotted.split("."))


def ip_str(b):
    return ".".join(str(x) for x in b)


def ipv4_header(src, dst, proto, payload_len, ttl=64, ident=0, tos=0, flags_frag=0x4000,
                options=b"", ihl=None, total_length=None, checksum=None, version=4):
    """A 20-byte (plus options) IPv4 header; src/dst are 4-byte strings. Fields that a test
    wants wrong (ihl, total_length, checksum, version) can be forced."""
    hl = 20 + len(options)
    if ihl is None:
        ihl = hl // 4
    if total_length is None:
        total_length = hl + payload_len
    h = bytearray(struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, tos, total_length, ident,
                              flags_frag, ttl, proto, 0, src, dst) + options)
    struct.pack_into("!H", h, 10, inet_checksum(bytes(h)) if checksum is None else checksum)
    return bytes(h)


def udp_segment(src, dst, sport, dport, payload, length=None, checksum=True):
    """UDP header + payload, with a correct checksum over the pseudo-header (or 0)."""
    ulen = 8 + len(payload)
    hdr = struct.pack("!HHHH", sport, dport, ulen if length is None else length, 0)
    if not checksum:
        return hdr + payload
    pseudo = src + dst + struct.pack("!BBH", 0, PROTO_UDP, ulen)
    c = inet_checksum(pseudo + hdr + payload) or 0xFFFF
    return hdr[:6] + struct.pack("!H", c) + payload


def ether(dst_mac, src_mac, ethertype, payload, pad_to=60):
    frame = dst_mac + src_mac + struct.pack("!H", ethertype) + payload
    if len(frame) < pad_to:
        frame += b"\0" * (pad_to - len(frame))
    return frame


MAC_DST = bytes.fromhex("020000000002")
MAC_SRC = bytes.fromhex("020000000001")


def udp_frame(src, dst, sport, dport, payload, ttl=64, ident=0, tos=0):
    """A complete, valid Ethernet/IPv4/UDP frame (padded to 60 bytes when short)."""
    seg = udp_segment(src, dst, sport, dport, payload)
    return ether(MAC_DST, MAC_SRC, ETH_IPV4,
                 ipv4_header(src, dst, PROTO_UDP, len(seg), ttl=ttl, ident=ident, tos=tos) + seg)


def routed(frame, l3=14):
    """What a router makes of a forwarded IPv4 frame: TTL - 1 and the header checksum
    recomputed from scratch (the switch patches it incrementally; both must agree)."""
    f = bytearray(frame)
    ihl = (f[l3] & 0x0F) * 4
    f[l3 + 8] -= 1
    f[l3 + 10:l3 + 12] = b"\0\0"
    f[l3 + 10:l3 + 12] = struct.pack("!H", inet_checksum(bytes(f[l3:l3 + ihl])))
    return bytes(f)


def ipv4_header_ok(frame, l3=14):
    ihl = (frame[l3] & 0x0F) * 4
    return inet_checksum(frame[l3:l3 + ihl]) == 0


def five_tuple(frame, l3=14):
    """(src, dst, sport, dport, proto) of an untagged IPv4 UDP/TCP frame; addresses as bytes."""
    ihl = (frame[l3] & 0x0F) * 4
    proto = frame[l3 + 9]
    sport, dport = struct.unpack_from("!HH", frame, l3 + ihl)
    return frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20], sport, dport, proto


# ---------------------------------------------------------------------------------------------
# the flow hash, independently of the switch

def _table(poly):
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t.append(c)
    return t


_CRC32C_TABLE = _table(0x82F63B78)
_CRC32_TABLE = _table(0xEDB88320)


def crc32c_raw(data, register):
    """Reflected CRC-32C with the register starting at `register` and no final inversion:
    rte_hash_crc(data, len, register)."""
    t = _CRC32C_TABLE
    c = register & 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c


def crc32_zlib(data, seed):
    """zlib's crc32(seed, data), computed here with a table rather than by zlib: the register
    starts at ~seed and the result is inverted."""
    t = _CRC32_TABLE
    c = ~seed & 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return ~c & 0xFFFFFFFF


def flow_key(src, dst, sport, dport, proto, dest_qp=None):
    key = src + dst + struct.pack("!HHB", sport, dport, proto)
    if dest_qp is not None:
        key += dest_qp.to_bytes(3, "big")
    return key


def flow_hash(key, seed, algorithm="crc32c"):
    if algorithm == "crc32c":
        return crc32c_raw(key, seed)
    if algorithm == "crc32":
        return crc32_zlib(key, seed)
    raise ValueError(algorithm)


def self_test():
    """The checkers check themselves against published vectors before judging the switch."""
    # CRC-32C check value (RFC 3720 / iSCSI): init ~0, final inversion, "123456789".
    assert crc32c_raw(b"123456789", 0xFFFFFFFF) ^ 0xFFFFFFFF == 0xE3069283
    # RFC 3720 B.4: 32 bytes of zeros -> 0x8A9136AA.
    assert crc32c_raw(bytes(32), 0xFFFFFFFF) ^ 0xFFFFFFFF == 0x8A9136AA
    # CRC-32 (IEEE) check value; seed continuation as zlib does it.
    assert crc32_zlib(b"123456789", 0) == 0xCBF43926
    assert crc32_zlib(b"6789", crc32_zlib(b"12345", 0)) == 0xCBF43926
    # The DESIGN.md IPv4 header of the ICRC test vector has checksum 0x145b.
    h = ipv4_header(ip_bytes("10.0.0.1"), ip_bytes("10.0.0.2"), PROTO_UDP, 0x5C - 20, ttl=64,
                    ident=0x1234)
    assert h[10:12] == b"\x14\x5b", h.hex()
