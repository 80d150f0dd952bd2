#!/usr/bin/python3
"""A Prometheus exporter for a running switch_emu or nic_emu.

Reads the program's counters from DPDK's telemetry socket (the read-only /spraynet/* commands:
READ_ONLY_COMMANDS below) and serves them, in the Prometheus text format or OpenMetrics
(whichever the scraper's Accept header asks for), at http://LISTEN/metrics. Every scrape reads
the socket afresh: the values are the program's at that moment.

    scripts/spraynet_exporter.py --file-prefix leaf0 --listen 127.0.0.1:9464
    curl -s http://127.0.0.1:9464/metrics | grep spraynet_switch_port_rx_packets

It never changes the program: a command is sent only if it is in READ_ONLY_COMMANDS; the acting
commands (/spraynet/link_set, link_rate, link_ber, link_loss, tcam_add, tcam_remove,
group_mode) and any command not listed are refused before anything is sent.

Needs Debian's python3-prometheus-client (scripts/setup.sh installs it) and permission to open
the socket (it is 0600 unless the config's telemetry.socket_mode says otherwise: run as the
user that runs the program, usually root).

Units: the telemetry sends whole numbers in the unit their key names (see
control/telemetry_commands.h); the exporter gives Prometheus base units: *_ppm and *_ppq become
ratios (*_ratio), *_mbps bytes per second, *_ns seconds."""
import argparse
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from socketserver import ThreadingMixIn

try:
    from prometheus_client import CollectorRegistry, make_wsgi_app
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                        HistogramMetricFamily, InfoMetricFamily)
except ImportError:  # pragma: no cover - the message is the point
    sys.stderr.write("spraynet_exporter: needs the prometheus_client module: "
                     "apt-get install python3-prometheus-client (scripts/setup.sh does), and run "
                     "it with Debian's /usr/bin/python3\n")
    sys.exit(2)

DEFAULT_LISTEN = "127.0.0.1:9464"

# What the exporter may send: DPDK's own listing ("/") and the /spraynet/ commands that only read.
# Anything else, acting commands first of all, is refused by TelemetryClient.query.
READ_ONLY_COMMANDS = frozenset({
    "/",
    # switch_emu (switch_emu/switch_telemetry.cc) and both programs (program/node_program.cc)
    "/spraynet/ports", "/spraynet/port", "/spraynet/drops", "/spraynet/counters",
    "/spraynet/accounting", "/spraynet/groups", "/spraynet/group", "/spraynet/tcam",
    "/spraynet/pfc", "/spraynet/pfc_buffer", "/spraynet/link_state", "/spraynet/buckets",
    "/spraynet/lcores",
    # nic_emu (nic_emu/main.cc)
    "/spraynet/spray", "/spraynet/ppcid", "/spraynet/anomaly", "/spraynet/reorder",
    "/spraynet/heat_map", "/spraynet/rc", "/spraynet/cc", "/spraynet/probe",
})
# Named here so that the refusal says what they are; refused like any command not listed above.
ACTING_COMMANDS = frozenset({
    "/spraynet/link_set", "/spraynet/link_rate", "/spraynet/link_ber", "/spraynet/link_loss",
    "/spraynet/tcam_add", "/spraynet/tcam_remove", "/spraynet/group_mode",
})


class ExporterError(Exception):
    """A condition the user can act on: said in one message, no traceback."""


class RefusedCommand(ExporterError):
    pass


def dpdk_run_dir():
    """Where DPDK puts a process's runtime directory (eal_get_runtime_dir())."""
    if os.geteuid() == 0:
        return "/var/run/dpdk"
    return os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "dpdk")


def socket_path_of(file_prefix):
    return os.path.join(dpdk_run_dir(), file_prefix, "dpdk_telemetry.v2")


class TelemetryClient:
    """DPDK's telemetry v2 protocol: SOCK_SEQPACKET; the server greets with JSON
    (max_output_len), then answers each command with one JSON object {command: reply}.
    One connection, kept between scrapes and made again when it breaks; one query at a time."""

    def __init__(self, path, timeout_s=5.0, hint=""):
        self.path = path
        self.hint = hint
        self.timeout_s = timeout_s
        self.sock = None
        self.max_len = 16384
        self.pid = None
        self.lock = threading.Lock()

    def connect(self):
        self.close()
        if not os.path.exists(self.path):
            raise ExporterError(f"no telemetry socket at {self.path}: is switch_emu or nic_emu "
                                f"running{self.hint}?")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(self.timeout_s)
        try:
            s.connect(self.path)
            greeting = json.loads(s.recv(1024).decode())
        except PermissionError as e:
            s.close()
            raise ExporterError(f"{self.path}: {e.strerror}: the socket is the program's user's "
                                f"(mode 0600 unless telemetry.socket_mode says otherwise)")
        except (OSError, ValueError) as e:
            s.close()
            raise ExporterError(f"{self.path}: cannot talk to it ({e}): the program may have "
                                f"exited and left the socket behind")
        self.sock = s
        self.max_len = int(greeting.get("max_output_len", 16384))
        self.pid = greeting.get("pid")

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    @staticmethod
    def check(command):
        name = command.split(",", 1)[0]
        if name in READ_ONLY_COMMANDS:
            return
        if name in ACTING_COMMANDS:
            raise RefusedCommand(f"refused {command}: an acting command; the exporter only reads")
        raise RefusedCommand(f"refused {command}: not in the exporter's read-only list")

    def query(self, command):
        """The reply to one read-only command (refused before sending otherwise)."""
        self.check(command)
        with self.lock:
            for attempt in (0, 1):
                try:
                    if self.sock is None:
                        self.connect()
                    self.sock.send(command.encode())
                    data = self.sock.recv(self.max_len)
                    if not data:
                        raise OSError("the program closed the connection")
                    reply = json.loads(data.decode())
                    return reply.get(command.split(",", 1)[0])
                except (OSError, ValueError) as e:
                    self.close()
                    if attempt == 1:
                        raise ExporterError(f"{self.path}: {command}: {e}")
        return None


# ---------------------------------------------------------------------------------------------
# From telemetry replies to metric families.

def convert(field, value):
    """(metric-name suffix, value in base units) for a telemetry field named in its unit."""
    if field.endswith(("_ppm", "_ppq")):
        base = field[:-4]
        return base + ("" if base.endswith("_ratio") else "_ratio"), \
            value / (1e6 if field.endswith("_ppm") else 1e15)
    if field.endswith("_mbps"):
        return field[:-5] + "_bytes_per_second", value * 1e6 / 8
    if field.endswith("_ns"):
        return field[:-3] + "_seconds", value / 1e9
    return field, value


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Families:
    """Metric families of one scrape, made on first use; label names fixed per family."""

    def __init__(self, namespace="spraynet"):
        self.ns = namespace
        self.families = {}

    def _family(self, kind, name, help_text, labels):
        full = f"{self.ns}_{name}"
        fam = self.families.get(full)
        if fam is None:
            cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily}[kind]
            fam = cls(full, help_text, labels=list(labels))
            fam._spraynet_labels = list(labels)
            self.families[full] = fam
        return fam, fam._spraynet_labels

    def add(self, kind, name, help_text, labels, value):
        if not is_number(value):
            return
        fam, names = self._family(kind, name, help_text, labels.keys())
        fam.add_metric([str(labels[n]) for n in names], float(value))

    def counter(self, name, help_text, labels, value):
        self.add("counter", name, help_text, labels, value)

    def gauge(self, name, help_text, labels, value):
        self.add("gauge", name, help_text, labels, value)

    def field(self, prefix, field, value, labels, gauges, command):
        """One telemetry field: a gauge if its name is in `gauges`, else a counter."""
        if not is_number(value):
            return
        name, v = convert(field, value)
        kind = "gauge" if field in gauges else "counter"
        self.add(kind, f"{prefix}_{name}", f"{command} {field}", labels, v)

    def collect(self):
        return list(self.families.values())


def rows(reply, head):
    """{index: {field: value}} from flattened telemetry keys head/<index>/<field>."""
    out = {}
    pat = re.compile(re.escape(head) + r"/(\d+)/(.+)")
    for k, v in reply.items():
        m = pat.fullmatch(k)
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return [out[i] for i in sorted(out)]


def as_dict(reply, command):
    if isinstance(reply, dict) and "error" in reply:
        raise ExporterError(f"{command}: {reply['error']}")
    if not isinstance(reply, dict):
        raise ExporterError(f"{command}: unexpected reply {reply!r}")
    return reply


def share(part, whole):
    return part / whole if whole else 0.0


LINK_GAUGES = {"up", "rate_mbps", "utilisation_ppm", "last_utilisation_ppm", "queued_bytes",
               "paused", "paused_fraction_ppm", "watchdog_dropping", "ber_ppq",
               "frame_loss_ratio_ppq", "health", "path_id", "updated_ns"}
ACCOUNTING_GAUGES = {"in_lane_handoff", "queued", "in_flight", "balanced", "node_balanced",
                     "reorder_held", "reorder_balanced", "snapshot_age_ns"}


def collect_lcores(t, f, base, kind):
    reply = t.query("/spraynet/lcores")
    if not isinstance(reply, dict):
        return
    for row in rows(reply, "lcores"):
        lab = {**base, "lcore": row.get("lcore", "")}
        for k in ("loops", "rx_packets", "tx_packets"):
            f.field(f"{kind}_lcore", k, row.get(k), lab, set(), "/spraynet/lcores")


def collect_link_state(t, f, base, kind, port_key):
    reply = t.query("/spraynet/link_state")
    if not isinstance(reply, dict) or "error" in reply:
        return  # no control loop in this process
    for row in rows(reply, "links"):
        lab = {**base, "port": row.get(port_key, "")}
        for k, v in row.items():
            f.field(f"{kind}_link", k, v, lab, LINK_GAUGES, "/spraynet/link_state")
    for k, v in reply.items():
        if not k.startswith("links/"):
            f.field(f"{kind}_control", k, v, base, {"period_ns", "sequence"},
                    "/spraynet/link_state")


def collect_accounting(t, f, base, kind):
    acc = as_dict(t.query("/spraynet/accounting"), "/spraynet/accounting")
    for k, v in acc.items():
        if k.startswith("ports/"):
            continue
        f.field(f"{kind}_accounting", k.replace("/", "_"), v, base,
                ACCOUNTING_GAUGES | {"egress_" + g for g in ACCOUNTING_GAUGES},
                "/spraynet/accounting")
    for row in rows(acc, "ports"):
        lab = {**base, "port": row.get("name", "")}
        for k, v in row.items():
            f.field(f"{kind}_port_egress", k, v, lab, ACCOUNTING_GAUGES, "/spraynet/accounting")


def collect_switch(t, f, name):
    base = {"switch": name}
    ports = t.query("/spraynet/ports") or []
    for i, port in enumerate(ports):
        cmd = f"/spraynet/port,{i}"
        r = as_dict(t.query(cmd), cmd)
        lab = {**base, "port": port}
        for k, v in r.items():
            parts = k.split("/")
            if parts[0] == "classes" and len(parts) == 3:
                cl = {**lab, "class": parts[1]}
                field = parts[2]
                if field.startswith("drops_"):
                    f.counter("switch_egress_drops", "Frames dropped at a port's egress class, "
                              "by cause (/spraynet/port classes/<tc>/drops_*)",
                              {**cl, "cause": field[len("drops_"):]}, v)
                else:
                    f.field("switch_class", field, v, cl, {"queued_bytes"}, "/spraynet/port")
            elif parts[0] == "drops" and len(parts) == 2:
                if parts[1] != "total":
                    f.counter("switch_ingress_drops", "Frames that arrived on the port and were "
                              "dropped, by cause (/spraynet/port drops/<cause>)",
                              {**lab, "cause": parts[1]}, v)
            elif parts[0] == "dpdk" and len(parts) == 4 and parts[1] in ("rx_queues", "tx_queues"):
                # Per queue, as the PMD counts them: dpdk/rx_queues/<i>/{queue,packets,bytes,errors}.
                if parts[3] in ("packets", "bytes", "errors"):
                    f.counter("switch_ethdev_queue_" + parts[3],
                              "The PMD's per-queue %s (/spraynet/port dpdk/%s)" % (parts[3], parts[1]),
                              {**lab, "direction": parts[1][:2], "queue": parts[2]}, v)
            elif parts[0] == "dpdk" and len(parts) == 2:
                f.field("switch_ethdev", parts[1], v, lab, set(),
                        "/spraynet/port dpdk (rte_eth_stats)")
            elif k != "snapshot_age_ns":
                f.field("switch_port", k, v, lab, {"link_up", "queued_bytes", "rate_mbps"},
                        "/spraynet/port")
        pfc_cmd = f"/spraynet/pfc,{i}"
        pfc = t.query(pfc_cmd)
        if isinstance(pfc, dict) and pfc.get("enabled"):
            for k, v in pfc.items():
                if k.startswith("priorities/") and isinstance(v, list):
                    field = k[len("priorities/"):]
                    for prio, x in enumerate(v):
                        f.field("switch_pfc", field, x, {**lab, "priority": prio},
                                {"buffered_bytes", "shared_bytes", "headroom_used_bytes",
                                 "headroom_peak_bytes", "xoff_asserted", "watchdog_dropping",
                                 "watchdog_storming"}, "/spraynet/pfc priorities")
                elif k not in ("enabled",):
                    f.field("switch_pfc_port", k, v, lab, {"headroom_bytes"}, "/spraynet/pfc")
    drops = as_dict(t.query("/spraynet/drops"), "/spraynet/drops")
    for cause, v in drops.items():
        if cause != "total":
            f.counter("switch_drops", "Frames the switch dropped, switch-wide, by cause "
                      "(/spraynet/drops)", {**base, "cause": cause}, v)
    counters = as_dict(t.query("/spraynet/counters"), "/spraynet/counters")
    for k, v in counters.items():
        f.field("switch", k, v, base, set(), "/spraynet/counters")
    collect_accounting(t, f, base, "switch")
    for g, group in enumerate(t.query("/spraynet/groups") or []):
        gcmd = f"/spraynet/group,{g}"
        gr = as_dict(t.query(gcmd), gcmd)
        members = gr.get("members", [])
        glab = {**base, "group": group}
        if f"{f.ns}_switch_group_info" not in f.families:
            f.families[f"{f.ns}_switch_group_info"] = InfoMetricFamily(
                f"{f.ns}_switch_group", "A group's mode (/spraynet/group)",
                labels=["switch", "group"])
        f.families[f"{f.ns}_switch_group_info"].add_metric(
            [name, group], {"mode": str(gr.get("mode", ""))})
        for m, x in zip(members, gr.get("member_packets", [])):
            f.counter("switch_group_member_packets", "Packets a group sent by each member "
                      "(/spraynet/group member_packets)", {**glab, "port": m}, x)
        for k in ("selected", "sprayed", "no_eligible_port", "rehashed_ineligible"):
            f.field("switch_group", k, gr.get(k), glab, set(), "/spraynet/group")
        for k in ("started", "moved", "expired", "collisions"):
            f.field("switch_group_flowlets", k, gr.get("flowlets/" + k), glab, set(),
                    "/spraynet/group flowlets")
        f.gauge("switch_group_flowlet_entries", "Entries of a group's DLB flowlet table "
                "(/spraynet/group flowlets/entries)", glab, gr.get("flowlets/entries", 0))
        bcmd = f"/spraynet/buckets,{g}"
        b = as_dict(t.query(bcmd), bcmd)
        size = b.get("size", 0)
        f.gauge("switch_group_buckets", "Buckets in a group's published table "
                "(/spraynet/buckets size)", glab, size)
        for m, x in zip(b.get("members", []), b.get("member_buckets", [])):
            f.gauge("switch_group_member_buckets", "Buckets a member owns in the published "
                    "table (/spraynet/buckets member_buckets)", {**glab, "port": m}, x)
            f.gauge("switch_group_bucket_share_ratio", "A member's share of the group's "
                    "buckets: member_buckets / size (/spraynet/buckets)", {**glab, "port": m},
                    share(x, size))
    tcam = as_dict(t.query("/spraynet/tcam"), "/spraynet/tcam")
    for k, v in tcam.items():
        parts = k.split("/")
        if len(parts) == 2:
            if parts[0] == "fallback_packets_by_cause":
                f.counter("switch_tcam_fallback_packets_by_cause", "Packets sent by ECMP "
                          "because their rule was refused, by cause (/spraynet/tcam)",
                          {**base, "cause": parts[1]}, v)
            elif parts[0] == "refused_rules_by_cause":
                f.gauge("switch_tcam_refused_rules_by_cause", "Rules refused, by cause "
                        "(/spraynet/tcam)", {**base, "cause": parts[1]}, v)
        else:
            f.field("switch_tcam", k, v, base, {"capacity", "spray_rule_limit",
                                                "admitted_rules", "refused_rules"},
                    "/spraynet/tcam")
    buf = t.query("/spraynet/pfc_buffer")
    if isinstance(buf, dict) and "pool_bytes" in buf:
        for k, v in buf.items():
            f.field("switch_pfc_buffer", k, v, base,
                    {"pool_bytes", "pool_used_bytes", "pool_peak_bytes", "threshold_bytes",
                     "headroom_used_bytes", "xoff_asserted", "alpha_ppm"}, "/spraynet/pfc_buffer")
    collect_link_state(t, f, base, "switch", "port")
    collect_lcores(t, f, base, "switch")


def depth_histogram(reply):
    """The reorder depth histogram (depth_histogram/<depth>: packets) as Prometheus buckets."""
    counts = {}
    for k, v in reply.items():
        if k.startswith("depth_histogram/") and is_number(v):
            counts[int(k.split("/")[1])] = v
    bounds = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    buckets = [(str(b), sum(c for d, c in counts.items() if d <= b)) for b in bounds]
    buckets.append(("+Inf", sum(counts.values())))
    return buckets, float(sum(d * c for d, c in counts.items()))


def collect_nic(t, f, name):
    base = {"nic": name}
    ports = t.query("/spraynet/ports")
    for row in _nic_port_rows(ports):
        lab = {**base, "port": row.get("name", ""), "role": row.get("role", "")}
        for k, v in row.items():
            f.field("nic_port", k, v, lab, {"link_up", "path_id"}, "/spraynet/ports")
    drops = as_dict(t.query("/spraynet/drops"), "/spraynet/drops")
    for cause, v in drops.items():
        if cause != "total":
            f.counter("nic_drops", "Frames the NIC dropped, by cause (/spraynet/drops)",
                      {**base, "cause": cause}, v)
    collect_accounting(t, f, base, "nic")
    spray = as_dict(t.query("/spraynet/spray"), "/spraynet/spray")
    uplinks = [r.get("name", str(i)) for i, r in enumerate(_nic_port_rows(ports))
               if r.get("role") == "uplink"]
    packets = spray.get("uplink_packets", [])
    weights = spray.get("weights", [])
    for i, x in enumerate(packets):
        port = uplinks[i] if i < len(uplinks) else str(i)
        f.counter("nic_spray_uplink_packets", "Packets sprayed on each uplink "
                  "(/spraynet/spray uplink_packets)", {**base, "port": port}, x)
        f.gauge("nic_spray_packet_share_ratio", "An uplink's share of the packets sprayed so "
                "far (/spraynet/spray uplink_packets)", {**base, "port": port},
                share(x, sum(packets)))
    for i, w in enumerate(weights):
        port = uplinks[i] if i < len(uplinks) else str(i)
        f.gauge("nic_spray_weight", "An uplink's spray weight (/spraynet/spray weights)",
                {**base, "port": port}, w)
        f.gauge("nic_spray_weight_share_ratio", "An uplink's share of the spray weights "
                "(/spraynet/spray weights)", {**base, "port": port}, share(w, sum(weights)))
    for k, v in spray.items():
        if not isinstance(v, list):
            f.field("nic_spray", k, v, base, set(), "/spraynet/spray")
    ppcid = as_dict(t.query("/spraynet/ppcid"), "/spraynet/ppcid")
    for k, v in ppcid.items():
        if k.startswith("by_path_id/"):
            f.counter("nic_ppcid_path_packets", "Received PPCIDs by path id (/spraynet/ppcid)",
                      {**base, "path_id": k.split("/")[1]}, v)
        else:
            f.counter("nic_ppcid_packets", "Received PPCIDs by verdict (/spraynet/ppcid)",
                      {**base, "verdict": k}, v)
    reorder = as_dict(t.query("/spraynet/reorder"), "/spraynet/reorder")
    if reorder.get("enabled"):
        buckets, total = depth_histogram(reorder)
        fam = HistogramMetricFamily(f"{f.ns}_nic_reorder_depth", "How far ahead of the "
                                    "expected PSN packets came (/spraynet/reorder "
                                    "depth_histogram)", labels=["nic"])
        fam.add_metric([name], buckets, total)
        f.families[f"{f.ns}_nic_reorder_depth"] = fam
        for k, v in reorder.items():
            if not k.startswith("depth_histogram/") and k != "enabled":
                f.field("nic_reorder", k, v, base,
                        {"max_depth", "p99_depth", "window", "hold_timeout_ns", "qps",
                         "buffered", "max_buffered_seen"}, "/spraynet/reorder")
    heat = t.query("/spraynet/heat_map")
    if isinstance(heat, dict):
        for row in rows(heat, "qps"):
            for i, x in enumerate(row.get("per_uplink", [])):
                port = uplinks[i] if i < len(uplinks) else str(i)
                f.counter("nic_qp_arrivals", "Arrivals per QP per uplink (/spraynet/heat_map)",
                          {**base, "qp": row.get("dest_qp", ""), "src_ip": row.get("src_ip", ""),
                           "port": port}, x)
    rc = t.query("/spraynet/rc")
    if isinstance(rc, dict) and "error" not in rc:
        for k, v in rc.items():
            if k == "cc/rate_mbps" and isinstance(v, list):
                for qp, x in enumerate(v):
                    f.gauge("nic_rc_dcqcn_rate_bytes_per_second", "Each QP's DCQCN rate "
                            "(/spraynet/rc cc/rate_mbps)", {**base, "qp": qp}, x * 1e6 / 8)
            elif k.startswith("completion_ns/"):
                stat = k.split("/")[1]
                if stat == "count":
                    f.counter("nic_rc_completions", "Messages completed with a completion time "
                              "(/spraynet/rc completion_ns/count)", base, v)
                else:
                    f.gauge("nic_rc_completion_seconds", "Message completion times "
                            "(/spraynet/rc completion_ns)", {**base, "stat": stat}, v / 1e9)
            else:
                f.field("nic_rc", k.replace("/", "_"), v, base,
                        {"qps", "done", "cc_qps_limited", "cc_qps_at_min_rate",
                         "cc_line_rate_mbps"}, "/spraynet/rc")
    cc = t.query("/spraynet/cc")
    if isinstance(cc, dict) and "error" not in cc:
        for k, v in cc.items():
            if not k.startswith("rc/"):  # those are /spraynet/rc's cc/*
                f.field("nic_cc", k, v, base, set(), "/spraynet/cc")
    probe = t.query("/spraynet/probe")
    if isinstance(probe, dict) and "error" not in probe:
        for k, v in probe.items():
            f.field("nic_probe", k, v, base,
                    {"min_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns", "jitter_ns",
                     "change_threshold_ns", "rate_pps", "sending", "dst_port", "samples",
                     "sample_cap_hit"}, "/spraynet/probe")
    anomaly = t.query("/spraynet/anomaly")
    if isinstance(anomaly, dict) and anomaly.get("enabled"):
        for k, v in anomaly.items():
            if "/" not in k and k != "enabled":
                f.field("nic_anomaly", k, v, base, {"qp_table_size", "flagged_qps"},
                        "/spraynet/anomaly")
    collect_link_state(t, f, base, "nic", "uplink")
    collect_lcores(t, f, base, "nic")


def _nic_port_rows(ports):
    """nic_emu's /spraynet/ports: an array of objects, flattened to <index>/<field>."""
    if not isinstance(ports, dict):
        return []
    out = {}
    for k, v in ports.items():
        head, _, field = k.partition("/")
        if head.isdigit() and field:
            out.setdefault(int(head), {})[field] = v
    return [out[i] for i in sorted(out)]


def kind_of(commands):
    """switch_emu or nic_emu, from the commands the process registered."""
    if "/spraynet/tcam" in commands:
        return "switch"
    if "/spraynet/spray" in commands:
        return "nic"
    raise ExporterError("the process has no /spraynet/ commands yet (still starting?) or is not "
                        "switch_emu or nic_emu")


class SpraynetCollector:
    """One scrape = one pass over the read-only commands. A scrape that fails says so in
    spraynet_up 0 and the reason on stderr, and the next one tries again."""

    def __init__(self, client, name):
        self.client = client
        self.name = name
        self.last_error = None

    def scrape(self):
        f = Families()
        commands = self.client.query("/")
        if not isinstance(commands, list):
            raise ExporterError("no command list from the socket")
        kind = kind_of(commands)
        (collect_switch if kind == "switch" else collect_nic)(self.client, f, self.name)
        return kind, f

    def collect(self):
        up = GaugeMetricFamily("spraynet_up", "1 when the last scrape read every command",
                               labels=["instance_name"])
        try:
            kind, f = self.scrape()
        except ExporterError as e:
            if str(e) != self.last_error:
                sys.stderr.write(f"spraynet_exporter: {e}\n")
            self.last_error = str(e)
            up.add_metric([self.name], 0)
            return [up]
        if self.last_error is not None:
            sys.stderr.write("spraynet_exporter: reading the socket again\n")
        self.last_error = None
        up.add_metric([self.name], 1)
        info = InfoMetricFamily("spraynet_exporter", "What the exporter reads",
                                labels=["instance_name"])
        info.add_metric([self.name], {"program": f"{kind}_emu", "socket": self.client.path,
                                      "pid": str(self.client.pid)})
        return [up, info] + f.collect()


# ---------------------------------------------------------------------------------------------

class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


def make_app(registry):
    metrics = make_wsgi_app(registry)

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"spraynet exporter: metrics at /metrics\n"]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: metrics at /metrics\n"]
    return app


def parse_listen(text):
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)|([^:\[\]]*):(\d+)", text)
    if not m:
        raise ExporterError(f"--listen {text}: want HOST:PORT, e.g. {DEFAULT_LISTEN} or [::1]:9464")
    host = m.group(1) or m.group(3) or "127.0.0.1"
    port = int(m.group(2) or m.group(4))
    if not 0 <= port <= 65535:
        raise ExporterError(f"--listen {text}: port {port} out of range")
    return host, port


def build_parser():
    p = argparse.ArgumentParser(
        prog="spraynet_exporter.py",
        description="Serves a running switch_emu's or nic_emu's counters to Prometheus: reads "
                    "the read-only /spraynet/* telemetry commands over DPDK's telemetry socket "
                    "at every scrape and answers at http://LISTEN/metrics (Prometheus text, or "
                    "OpenMetrics when the scraper asks for it).",
        epilog="Read-only: it sends only " + ", ".join(sorted(READ_ONLY_COMMANDS)) + "; "
               "acting commands (" + ", ".join(sorted(ACTING_COMMANDS)) + ") and any other are "
               "refused before sending. Exit status: 0 after SIGINT/SIGTERM or --once, 1 when "
               "the socket cannot be read at start or the address cannot be bound, 2 for bad "
               "arguments.")
    p.add_argument("--file-prefix", default="rte", metavar="PREFIX",
                   help="the program's EAL --file-prefix: the socket is "
                        f"{dpdk_run_dir()}/PREFIX/dpdk_telemetry.v2 (default: rte, DPDK's own "
                        "default)")
    p.add_argument("--socket", metavar="PATH",
                   help="the telemetry socket's path (instead of --file-prefix)")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to serve /metrics on (default: {DEFAULT_LISTEN}; "
                        "[::1]:PORT for IPv6; port 0 picks a free one, printed at start)")
    p.add_argument("--name", metavar="NAME",
                   help="the value of the switch (or nic) label (default: the file prefix, "
                        "or the socket's directory name)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                   help="how long one telemetry reply may take (default: 5)")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="at start, wait up to this long for the socket and the program's "
                        "/spraynet/ commands (default: 0, fail at once)")
    p.add_argument("--once", action="store_true",
                   help="print one scrape (Prometheus text) on stdout and exit, serving nothing")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error("--timeout must be > 0")
    if args.wait < 0:
        parser.error("--wait must be >= 0")
    try:
        host, port = parse_listen(args.listen)
    except ExporterError as e:
        parser.error(str(e))
    try:
        path = args.socket or socket_path_of(args.file_prefix)
        name = args.name or (os.path.basename(os.path.dirname(path)) if args.socket
                             else args.file_prefix)
        hint = "" if args.socket else (
            f" with --file-prefix {args.file_prefix} (an EAL argument; or give --socket PATH)")
        client = TelemetryClient(path, args.timeout, hint)
        collector = SpraynetCollector(client, name)
        # At start the socket must answer: a wrong prefix is said now, not as spraynet_up 0.
        deadline = time.monotonic() + args.wait
        while True:
            try:
                kind, _ = collector.scrape()
                break
            except ExporterError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        if args.once:
            from prometheus_client import generate_latest
            sys.stdout.write(generate_latest(registry).decode())
            return 0
        ThreadingServer.address_family = socket.getaddrinfo(host, port)[0][0]
        try:
            server = make_server(host, port, make_app(registry), ThreadingServer,
                                 handler_class=QuietHandler)
        except OSError as e:
            raise ExporterError(f"--listen {args.listen}: {e.strerror or e}")
    except ExporterError as e:
        sys.stderr.write(f"spraynet_exporter: {e}\n")
        return 1
    bound = server.server_address
    where = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
    sys.stderr.write(f"spraynet_exporter: {kind}_emu at {path} (pid {client.pid}); serving "
                     f"http://{where}/metrics\n")
    sys.stderr.flush()

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
