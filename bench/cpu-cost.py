#!/usr/bin/env python3
"""CPU cost per byte on loopback: fatpipe (TCP by stream count, the UDP channel, into a file
verified or not) against curl from vsftpd and iperf3 -Z, runs alternating, medians printed.
With FATPIPE_PKI=DIR (chain.pem, key.pem, ca.pem in it) the fatpipe server also has TLS: cases
`fatpipe:--tls off` (clear), `fatpipe:` (FTPS, data encrypted), `https:` (`fatpipe cp https://`,
one TLS connection) and `curl-https` (curl from fatpipe's HTTPS front-end) compare TLS costs.

For each run: the whole command's wall clock, the client's CPU (user + sys, from wait4) and the
server's (its /proc/PID/stat, children it reaped included: vsftpd forks a process per session).
Called by bench/cpu-cost.sh, which builds the binary; see there for the usage.
"""
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_cpu(pid):
    """(user, sys) seconds of a process and the children it has reaped."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ut, st, cut, cst = (int(x) for x in fields[11:15])
    return (ut + cut) / TICK, (st + cst) / TICK


def wait_listening(port, deadline=5.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Bench:
    def __init__(self, binary, size_mib, cases):
        self.bin = binary
        self.size = size_mib << 20
        self.cases = cases
        self.procs = []
        self.work = tempfile.mkdtemp(prefix="fatpipe-cost.", dir="/dev/shm")
        os.chmod(self.work, 0o755)
        self.root = os.path.join(self.work, "root")
        os.mkdir(self.root, 0o755)
        self.file = os.path.join(self.root, "file")
        # 64 MiB of random bytes, repeated: as costly to move and hash as any other bytes, and
        # written in seconds where /dev/urandom takes a minute for 16 GiB.
        block = random.Random(41).randbytes(64 << 20)
        with open(self.file, "wb") as dst:
            left = self.size
            while left:
                n = min(left, len(block))
                dst.write(block[:n])
                left -= n
        os.chmod(self.file, 0o644)
        self.servers = {}

    def start(self, name, argv, port):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        if not wait_listening(port):
            sys.exit(f"{name} did not start listening on port {port}")
        self.servers[name] = (p.pid, port)

    def start_servers(self):
        need = {c.split(":")[0] for c in self.cases}
        fport = free_port()
        argv = [self.bin, "serve", "--root", self.root, "--listen", f"127.0.0.1:{fport}",
                "--anonymous"]
        self.pki = os.environ.get("FATPIPE_PKI")
        if self.pki:
            self.https = free_port()
            argv += ["--tls-cert", os.path.join(self.pki, "chain.pem"),
                     "--tls-key", os.path.join(self.pki, "key.pem"),
                     "--https", f"127.0.0.1:{self.https}"]
        elif need & {"https", "curl-https"}:
            sys.exit("the https cases need FATPIPE_PKI")
        self.start("fatpipe", argv, fport)
        if need & {"curl", "vsftpd"}:
            vport = free_port()
            conf = os.path.join(self.work, "vsftpd.conf")
            os.makedirs("/var/run/vsftpd/empty", exist_ok=True)
            with open(conf, "w") as f:
                f.write(f"""listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port={vport}
background=NO
anonymous_enable=YES
local_enable=NO
anon_root={self.root}
no_anon_password=YES
seccomp_sandbox=NO
secure_chroot_dir=/var/run/vsftpd/empty
xferlog_enable=NO
""")
            self.start("vsftpd", ["vsftpd", conf], vport)
        if "iperf3" in need:
            iport = free_port()
            self.start("iperf3", ["iperf3", "-s", "-p", str(iport)], iport)

    def command(self, case):
        """(argv, server name, destination file to remove afterwards or None)."""
        tool, _, opts = case.partition(":")
        if tool == "curl":
            port = self.servers["vsftpd"][1]
            return ["curl", "-s", "--fail", "-o", "/dev/null",
                    f"ftp://127.0.0.1:{port}/file"], "vsftpd", None
        if tool == "curl-https":
            return ["curl", "-s", "--fail", "--cacert", os.path.join(self.pki, "ca.pem"),
                    "-o", "/dev/null", f"https://127.0.0.1:{self.https}/file"], "fatpipe", None
        if tool == "iperf3":
            port = self.servers["iperf3"][1]
            return ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-Z", "-n",
                    str(self.size)], "iperf3", None
        server = "vsftpd" if tool == "vsftpd" else "fatpipe"
        port = self.servers[server][1]
        args = opts.split()
        dest = "/dev/null"
        if "file" in args:
            args.remove("file")
            dest = os.path.join(self.work, "copy")
        url = f"ftp://127.0.0.1:{port}/file"
        if tool == "https":
            url = f"https://127.0.0.1:{self.https}/file"
        if self.pki:
            args += ["--ca", os.path.join(self.pki, "ca.pem")]
        argv = [self.bin, "cp", "--quiet", "--no-path-memory", *args, url, dest]
        return argv, server, None if dest == "/dev/null" else dest

    def run_once(self, case):
        argv, server, dest = self.command(case)
        spid = self.servers[server][0]
        su0, ss0 = proc_cpu(spid)
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read().decode(errors="replace").strip()
        p.stderr.close()
        # The server books the session's CPU when the session's thread or process ends.
        time.sleep(0.3)
        su1, ss1 = proc_cpu(spid)
        if dest:
            ok = os.path.getsize(dest) == self.size
            os.remove(dest)
            if not ok:
                return None
        if p.returncode != 0:
            print(f"  {case}: exit {p.returncode}: {err[-300:]}", file=sys.stderr)
            return None
        gib = self.size / (1 << 30)
        return {
            "rate": self.size * 8 / wall / 1e9,
            "cu": ru.ru_utime / gib, "cs": ru.ru_stime / gib,
            "su": (su1 - su0) / gib, "ss": (ss1 - ss0) / gib,
        }

    def close(self):
        for p in self.procs:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.work, ignore_errors=True)


LABELS = {
    "curl": "curl from vsftpd",
    "iperf3": "iperf3 -Z (memory to memory)",
    "curl-https": "curl from fatpipe's HTTPS front-end",
}


def label(case):
    if case in LABELS:
        return LABELS[case]
    tool, _, opts = case.partition(":")
    opts = opts.split()
    dest = "tmpfs file" if "file" in opts else "/dev/null"
    opts = [o for o in opts if o != "file"]
    source = {"vsftpd": " from vsftpd", "https": " over https://"}.get(tool, "")
    return f"fatpipe {' '.join(opts) or '(default)'}{source} -> {dest}"


def main():
    binary, size_mib, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cases = [c for c in sys.argv[4:] if c]
    missing = [t for t in ("curl", "vsftpd", "iperf3") if shutil.which(t) is None]
    skipped = [c for c in cases if c.split(":")[0] in ("curl", "vsftpd") and ("curl" in missing or "vsftpd" in missing)
               or c.split(":")[0] == "curl-https" and "curl" in missing
               or c.split(":")[0] == "iperf3" and "iperf3" in missing]
    for c in skipped:
        print(f"skipping {c}: {', '.join(missing)} not installed", file=sys.stderr)
    cases = [c for c in cases if c not in skipped]
    b = Bench(binary, size_mib, cases)
    results = {c: [] for c in cases}
    try:
        b.start_servers()
        for i in range(runs):
            # Each round in another order: no case always follows the same one.
            order = cases[i % len(cases):] + cases[:i % len(cases)]
            for c in order:
                r = b.run_once(c)
                if r:
                    results[c].append(r)
                print(f"  round {i + 1} {c}: " + (f"{r['rate']:.1f} Gbit/s" if r else "failed"),
                      file=sys.stderr)
    finally:
        b.close()
    print(f"| {size_mib} MiB over loopback, {os.cpu_count()} cores | runs | Gbit/s | "
          "CPU s/GiB client (user+sys) | server (user+sys) | total |")
    print("|---|---|---|---|---|---|")
    med = statistics.median
    for c in cases:
        rs = results[c]
        if not rs:
            print(f"| {label(c)} | 0 | failed | | | |")
            continue
        cu, cs = med(r["cu"] for r in rs), med(r["cs"] for r in rs)
        su, ss = med(r["su"] for r in rs), med(r["ss"] for r in rs)
        tot = med(r["cu"] + r["cs"] + r["su"] + r["ss"] for r in rs)
        rates = sorted(r["rate"] for r in rs)
        print(f"| {label(c)} | {len(rs)} | {med(rates):.1f} ({rates[0]:.1f}–{rates[-1]:.1f}) | "
              f"{cu + cs:.2f} ({cu:.2f}+{cs:.2f}) | {su + ss:.2f} ({su:.2f}+{ss:.2f}) | {tot:.2f} |")


if __name__ == "__main__":
    main()
