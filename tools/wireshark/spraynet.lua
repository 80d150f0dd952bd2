-- spraynet.lua: Wireshark/tshark postdissector that reads a RoCEv2 packet's UDP checksum as
-- the PPCID spraynet's NIC writes there (dataplane/wire/ppcid.h), marks ECN CE and CNPs, and
-- decodes the leaves' VXLAN overlays: CONGA's fields (spraynet.conga.*) and ConWeave's
-- (spraynet.conweave.*, with the inner frame after them), both below.
--
--   tshark -X lua_script:tools/wireshark/spraynet.lua -r uplink0.pcap \
--          -T fields -e spraynet.path_id -e spraynet.verdict
--   or copy it to ~/.local/lib/wireshark/plugins/ (Wireshark loads it at start-up).
--
-- PPCID layouts (bit 15 first); the check nibble is a fold of DestQP xor PSN in both:
--   ts-high   (default) 15-8 timestamp hash | 7-4 path id        | 3-0 check
--   path-high           15-8 path id        | 7-4 timestamp hash | 3-0 check
-- Verdicts mirror ppcid_read() in dataplane/wire/ppcid.cc, as a receiving NIC counts them:
--   absent          UDP checksum 0: the sender did not spray this packet (per-flow traffic)
--   ok              check nibble right, path id known under the configured layout
--   bad_check       check nibble does not match DestQP ^ PSN
--   layout_mismatch path id unknown as configured but known under the other layout
--   unknown_path    path id unknown under both layouts
-- Since the check nibble sits in bits 3-0 of both layouts it cannot tell them apart; only a
-- path id that names no known path can, so a swapped layout is flagged only when the
-- "Known path ids" preference lists the fabric's ids (spray-pcap.sh: uplink k is path k+1).
-- Left empty, every id the layout can carry counts as known (as fabric_paths auto does).
-- Like the C++ parser, only RoCEv2 over IPv4 on UDP destination port 4791 is read.
--
-- It also decodes CONGA's overlay (dataplane/wire/conga_overlay.h) into a "spraynet.conga"
-- tree: Wireshark's VXLAN dissector already takes UDP 4789 and the inner frame, but shows
-- CONGA's fields only as VXLAN-GBP bits and a group policy id. The VXLAN word of a CONGA frame:
--   byte 0   flags: 0x08 (I, VNI valid) | 0x40 (C, CONGA fields present)
--   byte 1   LBTag (bits 7-4) | CE (bits 3-1) | FB valid (bit 0)
--   byte 2   FB_LBTag (bits 7-4) | FB_Metric (bits 3-1)
--   byte 3   0;  bytes 4-6 VNI;  byte 7 source leaf id
-- Only a VXLAN header with both I and C set gets the tree (plain VXLAN reserves those bits).
-- FB_LBTag and FB_Metric are left out while FB valid is 0: the encapsulating leaf then writes
-- byte 2 as 0, which would read as "feedback: tag 0 uncongested" if shown.
-- Under either overlay the PPCID is read from the inner RoCEv2 UDP header (destination port
-- 4791), never from the outer one to 4789, whose checksum is always 0.

local spraynet = Proto("spraynet", "spraynet PPCID")

local TS_HIGH, PATH_HIGH = 1, 2
local LAYOUT_NAMES = { [TS_HIGH] = "ts-high", [PATH_HIGH] = "path-high" }
local CNP_OPCODE = 0x81
local ROCEV2_PORT = 4791

local pf = {
  ppcid = ProtoField.uint16("spraynet.ppcid", "PPCID", base.HEX,
                            nil, nil, "UDP checksum field as written by the sprayer"),
  layout = ProtoField.string("spraynet.layout", "Layout",
                             base.ASCII, "Layout the path id is decoded under"),
  path_id = ProtoField.uint8("spraynet.path_id", "Path id", base.DEC),
  timestamp = ProtoField.uint8("spraynet.timestamp", "Timestamp hash", base.HEX),
  check = ProtoField.uint8("spraynet.check", "Check nibble", base.HEX),
  check_expected = ProtoField.uint8("spraynet.check_expected", "Expected check nibble",
                                    base.HEX, nil, nil, "XOR fold of DestQP ^ PSN"),
  check_ok = ProtoField.bool("spraynet.check_ok", "Check OK"),
  layout_swapped = ProtoField.bool("spraynet.layout_swapped", "Layout swapped", base.NONE,
                                   nil, nil, "Path id known only under the other layout"),
  verdict = ProtoField.string("spraynet.verdict", "Verdict"),
  ecn_ce = ProtoField.bool("spraynet.ecn_ce", "ECN CE", base.NONE, nil, nil,
                           "IPv4 ECN field is 11 (congestion experienced)"),
  cnp = ProtoField.bool("spraynet.cnp", "CNP", base.NONE, nil, nil,
                        "BTH opcode 0x81: congestion notification packet"),
}
spraynet.fields = pf

local ex = {
  bad_check = ProtoExpert.new("spraynet.expert.bad_check", "PPCID check nibble fails",
                              expert.group.CHECKSUM, expert.severity.WARN),
  layout_mismatch = ProtoExpert.new("spraynet.expert.layout_mismatch",
                                    "PPCID layout looks swapped", expert.group.PROTOCOL,
                                    expert.severity.WARN),
  unknown_path = ProtoExpert.new("spraynet.expert.unknown_path", "PPCID names no known path",
                                 expert.group.PROTOCOL, expert.severity.NOTE),
  ecn_ce = ProtoExpert.new("spraynet.expert.ecn_ce", "ECN congestion experienced",
                           expert.group.SEQUENCE, expert.severity.CHAT),
  cnp = ProtoExpert.new("spraynet.expert.cnp", "RoCEv2 CNP", expert.group.SEQUENCE,
                        expert.severity.CHAT),
}
spraynet.experts = ex

spraynet.prefs.layout = Pref.enum("PPCID layout", TS_HIGH,
  "Layout the sprayer writes (nic_emu's spray.ppcid_layout)",
  { { 1, "ts-high", TS_HIGH }, { 2, "path-high", PATH_HIGH } }, false)
spraynet.prefs.known_paths = Pref.string("Known path ids", "",
  "Path ids of the fabric, e.g. 1-4 or 1,3,8-15; empty: every id the layout can carry")

local known -- set of known path ids, or nil for "all"

local function parse_known(text)
  local set, any = {}, false
  for item in string.gmatch(text or "", "[^,%s]+") do
    local lo, hi = string.match(item, "^(%d+)%-(%d+)$")
    lo = tonumber(lo or item)
    hi = tonumber(hi or lo)
    if lo == nil or hi == nil then error("spraynet: bad known path id '" .. item .. "'") end
    for id = lo, math.min(hi, 255) do set[id] = true; any = true end
  end
  return any and set or nil
end

function spraynet.prefs_changed()
  known = parse_known(spraynet.prefs.known_paths)
end
known = parse_known(spraynet.prefs.known_paths)

local function is_known(id)
  return known == nil or known[id] == true
end

-- XOR of the six nibbles of (DestQP ^ PSN), as ppcid_check_nibble().
local function check_nibble(qp, psn)
  local x = bit.band(bit.bxor(qp, psn), 0xFFFFFF)
  local n = 0
  for shift = 0, 20, 4 do n = bit.bxor(n, bit.rshift(x, shift)) end
  return bit.band(n, 0xF)
end

-- (path id, timestamp) of a PPCID under a layout, as ppcid_decode().
local function decode(value, layout)
  local high, mid = bit.rshift(value, 8), bit.band(bit.rshift(value, 4), 0xF)
  if layout == TS_HIGH then return mid, high end
  return high, mid
end

-- (verdict, path id, layout that recognised it) of a non-zero PPCID, as ppcid_read(); the
-- path id of a bad check is still decoded under the configured layout, since a corrupted check
-- nibble leaves the path bits as the sender wrote them.
local function read_ppcid(value, configured, qp, psn)
  local path = decode(value, configured)
  if bit.band(value, 0xF) ~= check_nibble(qp, psn) then return "bad_check", path, configured end
  if is_known(path) then return "ok", path, configured end
  local other = configured == TS_HIGH and PATH_HIGH or TS_HIGH
  local theirs = decode(value, other)
  if is_known(theirs) then return "layout_mismatch", theirs, other end
  return "unknown_path", path, configured
end

-- CONGA's overlay: its own protocol, so "spraynet.conga" filters frames that carry the fields
-- and -O spraynet.conga shows just them; the postdissector below fills it in.
local conga = Proto("spraynet.conga", "spraynet CONGA overlay")

local VXLAN_FLAG_I, VXLAN_FLAG_CONGA = 0x08, 0x40
local VXLAN_BYTES = 8

-- Masks on bytes 1 and 2 let Wireshark show each field's bits (0101 .... = LBTag: 5).
local cf = {
  lbtag = ProtoField.uint8("spraynet.conga.lbtag", "LBTag", base.DEC, nil, 0xF0,
                           "Uplink of the source leaf the packet left on"),
  ce = ProtoField.uint8("spraynet.conga.ce", "CE", base.DEC, nil, 0x0E,
                        "Largest congestion metric on the path so far (0-7)"),
  fb_valid = ProtoField.bool("spraynet.conga.fb_valid", "FB valid", 8, nil, 0x01,
                             "FB_LBTag and FB_Metric carry feedback"),
  fb_lbtag = ProtoField.uint8("spraynet.conga.fb_lbtag", "FB_LBTag", base.DEC, nil, 0xF0,
                              "Feedback: an uplink of the leaf this packet goes to"),
  fb_metric = ProtoField.uint8("spraynet.conga.fb_metric", "FB_Metric", base.DEC, nil, 0x0E,
                               "Feedback: the CE lately seen on FB_LBTag's path (0-7)"),
  vni = ProtoField.uint24("spraynet.conga.vni", "VNI", base.DEC),
  src_leaf = ProtoField.uint8("spraynet.conga.src_leaf", "Source leaf", base.DEC),
}
conga.fields = cf

-- ConWeave's overlay (dataplane/wire/conweave_overlay.h), a "spraynet.conweave" tree of its own
-- for the same reasons. Unlike CONGA's it cannot be left to Wireshark's VXLAN dissector: 8 more
-- bytes follow the VXLAN word, which that dissector would read as the inner frame's MACs. So this
-- protocol takes UDP 4789 from it, decodes a VXLAN header with both I and W (0x20) set and the
-- inner frame after the 8 bytes, and hands every other VXLAN frame back untouched.
--   byte 0   flags: 0x08 (I) | 0x20 (W, ConWeave fields present)
--   byte 1   message (bits 7-6: 0 data, 1 RTT reply, 2 CLEAR, 3 NOTIFY) | flag (bits 5-4, data
--            only: 1 DATA, 2 INIT = RTT request, 3 TAIL) | phase (bit 3: sent on the new path)
--   byte 2   epoch;  byte 3 the source leaf's uplink (bits 3-0);  bytes 4-6 VNI;  byte 7 leaf
--   extra 8  data: ts_tx, ts_tail (32-bit ns each); RTT reply, CLEAR, NOTIFY: a 64-bit flow key
-- Control messages carry nothing after the flow key (60-byte frames, 2 of them Ethernet padding).
local conweave = Proto("spraynet.conweave", "spraynet ConWeave overlay")

local VXLAN_FLAG_CONWEAVE = 0x20
local VXLAN_PORT = 4789
local CONWEAVE_EXTRA = 8
local CW_DATA = 0
local CW_MESSAGES = { [0] = "data", [1] = "RTT reply", [2] = "CLEAR", [3] = "NOTIFY" }
local CW_FLAGS = { [1] = "DATA", [2] = "INIT", [3] = "TAIL" }

local wf = {
  message = ProtoField.uint8("spraynet.conweave.message", "Message", base.DEC, CW_MESSAGES, 0xC0,
                             "Data packet or a destination leaf's control message"),
  flag = ProtoField.uint8("spraynet.conweave.flag", "Flag", base.DEC, CW_FLAGS, 0x30,
                          "Data packets: INIT asks for an RTT reply, TAIL is the epoch's last on "
                          .. "the old path"),
  phase = ProtoField.uint8("spraynet.conweave.phase", "Phase", base.DEC, nil, 0x08,
                           "1: sent on the new path after the epoch's TAIL"),
  epoch = ProtoField.uint8("spraynet.conweave.epoch", "Epoch", base.DEC),
  uplink = ProtoField.uint8("spraynet.conweave.uplink", "Uplink", base.DEC, nil, 0x0F,
                            "The source leaf's uplink (a NOTIFY names the congested one)"),
  vni = ProtoField.uint24("spraynet.conweave.vni", "VNI", base.DEC),
  leaf = ProtoField.uint8("spraynet.conweave.leaf", "Leaf", base.DEC, nil, nil,
                          "The sending leaf: data's source leaf, a control message's destination"),
  ts_tx = ProtoField.uint32("spraynet.conweave.ts_tx", "Send time", base.DEC, nil, nil,
                            "The source leaf's clock when it sent the packet (ns, low 32 bits)"),
  ts_tail = ProtoField.uint32("spraynet.conweave.ts_tail", "TAIL send time", base.DEC, nil, nil,
                              "This epoch's TAIL's send time (ns), 0 before the reroute"),
  flow_key = ProtoField.uint64("spraynet.conweave.flow_key", "Flow key", base.HEX, nil, nil,
                               "The flow the control message is about"),
}
conweave.fields = wf

-- VXLAN's own dissector, taken before the entry is replaced. Wireshark 4.0 registers it under no
-- name (Dissector.get("vxlan") is nil there), so the table's entry comes first.
local udp_port = DissectorTable.get("udp.port")
local vxlan = udp_port:get_dissector(VXLAN_PORT)
if vxlan == nil then
  local ok, d = pcall(Dissector.get, "vxlan")
  vxlan = ok and d or nil
end
local eth = Dissector.get("eth_withoutfcs")

function conweave.dissector(tvb, pinfo, tree)
  local want = bit.bor(VXLAN_FLAG_I, VXLAN_FLAG_CONWEAVE)
  if tvb:len() < VXLAN_BYTES + CONWEAVE_EXTRA or bit.band(tvb(0, 1):uint(), want) ~= want then
    -- Not ConWeave's (nor for conweave_parse()): VXLAN's dissector as before; CONGA's tree
    -- comes from the postdissector.
    if vxlan == nil then return 0 end
    return vxlan:call(tvb, pinfo, tree)
  end
  pinfo.cols.protocol = "ConWeave"
  pinfo.cols.info:clear()  -- as VXLAN's dissector does: the outer UDP ports tell nothing here
  local b1 = tvb(1, 1):uint()
  local message, flag, phase = bit.rshift(b1, 6), bit.band(bit.rshift(b1, 4), 3),
                               bit.band(bit.rshift(b1, 3), 1)
  local epoch, uplink, leaf = tvb(2, 1):uint(), bit.band(tvb(3, 1):uint(), 0xF), tvb(7, 1):uint()
  local t = tree:add(conweave, tvb(0, VXLAN_BYTES + CONWEAVE_EXTRA))
  t:add(wf.message, tvb(1, 1))
  -- Control messages carry the encoder's default flag in bits 5-4; they mean nothing there.
  if message == CW_DATA then t:add(wf.flag, tvb(1, 1)) end
  t:add(wf.phase, tvb(1, 1))
  t:add(wf.epoch, tvb(2, 1))
  t:add(wf.uplink, tvb(3, 1))
  t:add(wf.vni, tvb(4, 3))
  t:add(wf.leaf, tvb(7, 1))
  local what
  if message == CW_DATA then
    t:add(wf.ts_tx, tvb(8, 4))
    t:add(wf.ts_tail, tvb(12, 4))
    -- Flag 0 is no valid data frame (conweave_parse() drops it): shown, not guessed at.
    what = string.format("data %s epoch %d phase %d uplink %d", CW_FLAGS[flag] or "flag 0",
                         epoch, phase, uplink)
  else
    t:add(wf.flow_key, tvb(8, 8))
    what = string.format("%s epoch %d", CW_MESSAGES[message], epoch)
  end
  t:set_text(string.format("spraynet ConWeave overlay, leaf %d, %s", leaf, what))
  local summary = string.format("[ConWeave leaf %d %s]", leaf, what)
  local rest = VXLAN_BYTES + CONWEAVE_EXTRA
  if message == CW_DATA and tvb:len() > rest then
    eth:call(tvb(rest):tvb(), pinfo, tree)
    -- After the inner frame's dissectors, which set the info column rather than append to it.
    pinfo.cols.info:append(" " .. summary)
  else
    pinfo.cols.info = summary
  end
  return tvb:len()
end
-- Every frame to 4789 now passes through this protocol, so frame.protocols lists
-- spraynet.conweave before vxlan even for CONGA and plain VXLAN (the trees are unchanged).
udp_port:add(VXLAN_PORT, conweave)

-- HPCC's in-band telemetry (dataplane/wire/int_header.h): INT-MD over UDP of the P4.org INT
-- spec v2.1 on UDP 4792 (data packets the switches push records on) and 4793 (the ACK that
-- echoes them), a "spraynet.int" tree, then the RoCEv2 packet after the stack as Wireshark's own
-- InfiniBand dissector has it. Shim: type (4b) | NPT (2b) | 2b | Length in words, the shim not
-- counted (8b) | original UDP port (16b). INT-MD header: version (4b) | D | E | M | 12b | Hop ML
-- (5b) | Remaining Hop Count (8b) | instruction bitmap (16b) | domain (16b) | DS instruction
-- (16b) | DS flags (16b). Records, newest first, 24 bytes: queue id (8b) | occupancy in 80-byte
-- cells (24b) | egress time, ns (64b) | bytes sent by the port (64b) | line rate, Mbit/s (32b).
local int_proto = Proto("spraynet.int", "spraynet INT (HPCC)")
local INT_PORT, INT_ECHO_PORT = 4792, 4793
local INT_HOP_BYTES = 24
local nf = {
  type = ProtoField.uint8("spraynet.int.type", "Shim type", base.DEC,
                          { [1] = "INT-MD", [2] = "INT-Destination", [3] = "INT-MX" }, 0xF0),
  npt = ProtoField.uint8("spraynet.int.npt", "Next protocol type", base.DEC, nil, 0x0C),
  length = ProtoField.uint8("spraynet.int.length", "Length (words)", base.DEC, nil, nil,
                            "The INT-MD header and stack in 4-byte words, the shim not counted"),
  orig_port = ProtoField.uint16("spraynet.int.orig_port", "Original UDP port", base.DEC),
  version = ProtoField.uint8("spraynet.int.version", "Version", base.DEC, nil, 0xF0),
  d = ProtoField.uint8("spraynet.int.d", "Discard", base.DEC, nil, 0x08),
  e = ProtoField.uint8("spraynet.int.e", "Hop count exceeded", base.DEC, nil, 0x04),
  m = ProtoField.uint8("spraynet.int.m", "MTU exceeded", base.DEC, nil, 0x02),
  hop_ml = ProtoField.uint8("spraynet.int.hop_ml", "Hop metadata length (words)", base.DEC, nil,
                            0x1F),
  rhc = ProtoField.uint8("spraynet.int.rhc", "Remaining hop count", base.DEC),
  bitmap = ProtoField.uint16("spraynet.int.bitmap", "Instruction bitmap", base.HEX),
  domain = ProtoField.uint16("spraynet.int.domain", "Domain specific ID", base.HEX),
  ds_instruction = ProtoField.uint16("spraynet.int.ds_instruction", "DS instruction", base.HEX),
  ds_flags = ProtoField.uint16("spraynet.int.ds_flags", "DS flags", base.HEX),
  hops = ProtoField.uint8("spraynet.int.hops", "Records"),
  echo = ProtoField.bool("spraynet.int.echo", "Echoed in an ACK"),
  hop_queue = ProtoField.uint8("spraynet.int.hop.queue", "Queue ID", base.DEC),
  hop_qlen = ProtoField.uint32("spraynet.int.hop.qlen", "Queue occupancy (bytes)", base.DEC),
  hop_ts = ProtoField.uint64("spraynet.int.hop.egress_ts", "Egress timestamp (ns)", base.DEC),
  hop_tx = ProtoField.uint64("spraynet.int.hop.tx_bytes", "Bytes sent by the port", base.DEC),
  hop_rate = ProtoField.uint32("spraynet.int.hop.line_rate", "Line rate (Mbit/s)", base.DEC),
}
int_proto.fields = nf
local udp_ports = DissectorTable.get("udp.port")
local roce_v2 = udp_ports:get_dissector(4791)

function int_proto.dissector(tvb, pinfo, tree)
  if tvb:len() < 16 then return 0 end
  local b0, words = tvb(0, 1):uint(), tvb(1, 1):uint()
  local int_bytes = 4 + words * 4
  if bit.rshift(b0, 4) ~= 1 or int_bytes > tvb:len() or words * 4 < 12 then return 0 end
  local md = 4
  local n = math.floor((words * 4 - 12) / INT_HOP_BYTES)
  local echo = pinfo.dst_port == INT_ECHO_PORT
  local t = tree:add(int_proto, tvb(0, int_bytes))
  t:add(nf.type, tvb(0, 1))
  t:add(nf.npt, tvb(0, 1))
  t:add(nf.length, tvb(1, 1))
  t:add(nf.orig_port, tvb(2, 2))
  t:add(nf.version, tvb(md, 1))
  t:add(nf.d, tvb(md, 1))
  t:add(nf.e, tvb(md, 1))
  t:add(nf.m, tvb(md, 1))
  t:add(nf.hop_ml, tvb(md + 2, 1))
  t:add(nf.rhc, tvb(md + 3, 1))
  t:add(nf.bitmap, tvb(md + 4, 2))
  t:add(nf.domain, tvb(md + 6, 2))
  t:add(nf.ds_instruction, tvb(md + 8, 2))
  t:add(nf.ds_flags, tvb(md + 10, 2))
  t:add(nf.hops, n):set_generated()
  t:add(nf.echo, echo):set_generated()
  for i = 0, n - 1 do
    local r = tvb(md + 12 + i * INT_HOP_BYTES, INT_HOP_BYTES)
    local h = t:add(int_proto, r, string.format("Record %d (%s)", i + 1,
                                                i == 0 and "newest" or "older"))
    h:add(nf.hop_queue, r(0, 1))
    h:add(nf.hop_qlen, r(1, 3), r(1, 3):uint() * 80)
    h:add(nf.hop_ts, r(4, 8))
    h:add(nf.hop_tx, r(12, 8))
    h:add(nf.hop_rate, r(20, 4))
  end
  t:set_text(string.format("spraynet INT (HPCC), %d record%s%s", n, n == 1 and "" or "s",
                           echo and ", echoed" or ""))
  local rest = tvb:len() - int_bytes
  if roce_v2 ~= nil and tvb(2, 2):uint() == 4791 and rest > 0 then
    roce_v2:call(tvb(int_bytes):tvb(), pinfo, tree)
  end
  pinfo.cols.info:append(string.format(" [INT %d record%s%s]", n, n == 1 and "" or "s",
                                       echo and " echoed" or ""))
  return tvb:len()
end
udp_ports:add(INT_PORT, int_proto)
udp_ports:add(INT_ECHO_PORT, int_proto)

local f_vxlan = Field.new("vxlan")  -- the protocol item: its range is the 8-byte VXLAN header
local f_ecn = Field.new("ip.dsfield.ecn")
local f_dport = Field.new("udp.dstport")
local f_csum = Field.new("udp.checksum")
local f_opcode = Field.new("infiniband.bth.opcode")
local f_qp = Field.new("infiniband.bth.destqp")
local f_psn = Field.new("infiniband.bth.psn")

-- The innermost instance: with tunnels the RoCE packet is the last one in the frame.
local function last(field)
  local all = { field() }
  return all[#all]
end

-- IRN's SACK (dataplane/wire/irn_sack.h): the bytes an IRN responder puts after a NAK's AETH,
-- before the ICRC, which Wireshark's InfiniBand dissector leaves undecoded.
--   bits (16b, a multiple of 32, 32..1024) | reserved (16b, 0) | bitmap (bits / 8 bytes)
--   bitmap bit i (byte i / 8, most significant bit first): PSN (the NAK's PSN + 1 + i) arrived
-- spraynet.sack.psn lists every PSN the bitmap says arrived.
local sack_proto = Proto("spraynet.sack", "spraynet IRN SACK")
local sf = {
  bits = ProtoField.uint16("spraynet.sack.bits", "Bitmap length (bits)", base.DEC),
  reserved = ProtoField.uint16("spraynet.sack.reserved", "Reserved", base.HEX),
  count = ProtoField.uint16("spraynet.sack.count", "PSNs received beyond the NAK's", base.DEC),
  psn = ProtoField.uint32("spraynet.sack.psn", "Received PSN", base.DEC),
}
sack_proto.fields = { sf.bits, sf.reserved, sf.count, sf.psn }
local sack_expert = ProtoExpert.new("spraynet.expert.sack_malformed", "IRN SACK malformed",
                                    expert.group.MALFORMED, expert.severity.ERROR)
sack_proto.experts = { sack_expert }
local f_syndrome = Field.new("infiniband.aeth.syndrome")
local f_iplen = Field.new("ip.len")
local ACK_OPCODE = 0x11

local function add_sack(tvb, pinfo, tree)
  local opcode, syndrome, psn, iplen = last(f_opcode), last(f_syndrome), last(f_psn), last(f_iplen)
  if not (opcode and syndrome and psn and iplen) or opcode.value ~= ACK_OPCODE then return end
  if bit.band(syndrome.value, 0xE0) ~= 0x60 then return end  -- a NAK
  -- From the AETH's end to the ICRC (the last 4 bytes of the IPv4 datagram; padding after it).
  local from = syndrome.range:offset() + 4
  local to = iplen.range:offset() - 2 + iplen.value - 4
  if to <= from or to > tvb:len() then return end
  local r = tvb:range(from, to - from)
  local t = tree:add(sack_proto, r)
  if r:len() < 4 then
    t:add_proto_expert_info(sack_expert, "shorter than its header")
    return
  end
  local bits = r(0, 2):uint()
  t:add(sf.bits, r(0, 2))
  t:add(sf.reserved, r(2, 2))
  if bits < 32 or bits > 1024 or bits % 32 ~= 0 or r:len() ~= 4 + bits / 8 then
    t:add_proto_expert_info(sack_expert, string.format(
      "%d bits in %d bytes: a multiple of 32 from 32 to 1024, in 4 + bits / 8 bytes", bits,
      r:len()))
    return
  end
  local n = 0
  for byte = 0, bits / 8 - 1 do
    local v = r(4 + byte, 1):uint()
    for k = 0, 7 do
      if bit.band(v, bit.rshift(0x80, k)) ~= 0 then
        t:add(sf.psn, r(4 + byte, 1), bit.band(psn.value + 1 + byte * 8 + k, 0xFFFFFF))
        n = n + 1
      end
    end
  end
  t:add(sf.count, r(0, 2), n):set_generated()
  t:set_text(string.format("spraynet IRN SACK: %d PSNs received beyond %d", n, psn.value))
  pinfo.cols.info:append(string.format(" [SACK %d]", n))
end

-- A "spraynet.conga" tree for every VXLAN header with I and C set (one per overlay; a frame
-- tunnelled twice would get two). The bytes are read from the header itself: Wireshark's vxlan.*
-- fields cut these bits as VXLAN-GBP's (a 16-bit flags word over bytes 0-1, where LBTag, CE and
-- FB valid show as reserved, Don't Learn and Policy Applied bits; a Group Policy ID over 2-3).
local function add_conga(tree, pinfo)
  for _, vx in ipairs({ f_vxlan() }) do
    local r = vx.range
    if r:len() >= VXLAN_BYTES then
      local flags = r(0, 1):uint()
      if bit.band(flags, VXLAN_FLAG_I) ~= 0 and bit.band(flags, VXLAN_FLAG_CONGA) ~= 0 then
        local b1, b2 = r(1, 1):uint(), r(2, 1):uint()
        local lbtag, ce = bit.rshift(b1, 4), bit.band(bit.rshift(b1, 1), 7)
        local fb_valid = bit.band(b1, 1) == 1
        local src_leaf = r(7, 1):uint()
        local t = tree:add(conga, r(0, VXLAN_BYTES))
        t:add(cf.lbtag, r(1, 1))
        t:add(cf.ce, r(1, 1))
        t:add(cf.fb_valid, r(1, 1))
        local fb = "no FB"
        if fb_valid then
          t:add(cf.fb_lbtag, r(2, 1))
          t:add(cf.fb_metric, r(2, 1))
          fb = string.format("FB tag %d metric %d", bit.rshift(b2, 4),
                             bit.band(bit.rshift(b2, 1), 7))
        end
        t:add(cf.vni, r(4, 3))
        t:add(cf.src_leaf, r(7, 1))
        t:set_text(string.format("spraynet CONGA overlay, leaf %d, LBTag %d, CE %d, %s",
                                 src_leaf, lbtag, ce, fb))
        pinfo.cols.info:append(string.format(" [CONGA leaf %d tag %d CE %d %s]", src_leaf,
                                             lbtag, ce, fb))
      end
    end
  end
end

-- The RoCEv2 UDP header's destination port and checksum fields, or nil. Under CONGA's overlay
-- a frame has two UDP headers, the outer one to VXLAN's 4789 (checksum 0) first: take the last
-- header to 4791 and the checksum 4 bytes after its port, so the two always come from the same
-- header, however many UDP headers precede or follow it.
local function rocev2_udp()
  local dports, csums = { f_dport() }, { f_csum() }
  for i = #dports, 1, -1 do
    local dport = dports[i]
    if dport.value == ROCEV2_PORT then
      for _, csum in ipairs(csums) do
        if csum.range:offset() == dport.range:offset() + 4 then return dport, csum end
      end
      return nil
    end
  end
  return nil
end

-- The PPCID's fields and expert info under t, for a packet the sprayer wrote one into.
local function add_ppcid(t, pinfo, range, value, configured, qp, psn)
  local verdict, path, layout = read_ppcid(value, configured, qp, psn)
  local _, ts = decode(value, layout)
  local check, expected = bit.band(value, 0xF), check_nibble(qp, psn)
  t:add(pf.layout, range, LAYOUT_NAMES[layout])
  t:add(pf.path_id, range, path)
  t:add(pf.timestamp, range, ts)
  t:add(pf.check, range, check)
  t:add(pf.check_expected, range, expected):set_generated()
  t:add(pf.check_ok, range, check == expected)
  t:add(pf.layout_swapped, range, verdict == "layout_mismatch")
  t:add(pf.verdict, range, verdict)
  if verdict == "bad_check" then
    t:add_proto_expert_info(ex.bad_check, string.format(
      "PPCID check nibble 0x%x, expected 0x%x from DestQP ^ PSN: corrupted or not a PPCID",
      check, expected))
  elseif verdict == "layout_mismatch" then
    t:add_proto_expert_info(ex.layout_mismatch, string.format(
      "Path id unknown under %s but %d under %s: the sender likely uses %s",
      LAYOUT_NAMES[configured], path, LAYOUT_NAMES[layout], LAYOUT_NAMES[layout]))
  elseif verdict == "unknown_path" then
    t:add_proto_expert_info(ex.unknown_path)
  end
  local summary = string.format("PPCID 0x%04x, path %d (%s), %s", value, path,
                                LAYOUT_NAMES[layout], verdict)
  pinfo.cols.info:append(string.format(" [PPCID path %d %s%s]", path, LAYOUT_NAMES[layout],
                                       verdict == "ok" and "" or " " .. verdict))
  return summary
end

function spraynet.dissector(tvb, pinfo, tree)
  add_conga(tree, pinfo)  -- whatever the inner frame carries
  add_sack(tvb, pinfo, tree)

  -- The BTH and the IPv4 header are the innermost ones: the RoCEv2 packet's, not the overlay's
  -- (so ecn_ce is the inner header's mark; a spine's mark on the outer one is ip.dsfield.ecn).
  local opcode, qp, psn, ecn = last(f_opcode), last(f_qp), last(f_psn), last(f_ecn)
  local dport, csum = rocev2_udp()
  if not (opcode and qp and psn and ecn and dport and csum) then return end

  local t = tree:add(spraynet, csum.range)
  t:add(pf.ppcid, csum.range, csum.value)
  local summary
  if csum.value == 0 then
    t:add(pf.verdict, csum.range, "absent")
    summary = "no PPCID (UDP checksum 0: not sprayed)"
  else
    summary = add_ppcid(t, pinfo, csum.range, csum.value, spraynet.prefs.layout, qp.value,
                        psn.value)
  end
  t:set_text("spraynet " .. summary)
  local ce, cnp = ecn.value == 3, opcode.value == CNP_OPCODE
  t:add(pf.ecn_ce, ecn.range, ce)
  t:add(pf.cnp, opcode.range, cnp)
  if ce then
    t:add_proto_expert_info(ex.ecn_ce)
    pinfo.cols.info:append(" [CE]")
  end
  if cnp then t:add_proto_expert_info(ex.cnp) end
end

register_postdissector(spraynet)
