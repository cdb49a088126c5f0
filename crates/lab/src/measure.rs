//! Parsers for what the kernel reports: `ss -tmH` socket memory and `/proc/net/snmp` counters.

/// Receive and send buffer sizes summed over the sockets of one `ss -tmH` listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BufferSums {
    /// Sum of `rb` (receive buffer size) over the sockets, bytes.
    pub rb: u64,
    /// Sum of `tb` (send buffer size) over the sockets, bytes.
    pub tb: u64,
}

/// Sums the `skmem:(…rbN,…tbN…)` fields of an `ss -tm` listing.
pub fn sum_skmem(listing: &str) -> BufferSums {
    let mut s = BufferSums::default();
    for part in listing.split("skmem:(").skip(1) {
        let fields = part.split(')').next().unwrap_or("");
        for f in fields.split(',') {
            if let Some(v) = f.strip_prefix("rb").and_then(|v| v.parse::<u64>().ok()) {
                s.rb += v;
            } else if let Some(v) = f.strip_prefix("tb").and_then(|v| v.parse::<u64>().ok()) {
                s.tb += v;
            }
        }
    }
    s
}

/// `RetransSegs` from the `Tcp:` lines of `/proc/net/snmp`.
pub fn retrans_segs(snmp: &str) -> Option<u64> {
    let mut lines = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let i = names.iter().position(|n| *n == "RetransSegs")?;
    values.get(i)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skmem_sums() {
        let ss = "ESTAB 0 0 198.18.0.2:2811 198.18.0.1:40000\n\t skmem:(r0,rb131072,t0,tb87040,f0,w0,o0,bl0,d0)\n\
                  ESTAB 0 0 198.18.0.2:40001 198.18.0.1:40002\n\t skmem:(r4608,rb6291456,t8,tb4194304,f3584,w0,o0,bl0,d12)\n";
        assert_eq!(
            sum_skmem(ss),
            BufferSums {
                rb: 131072 + 6291456,
                tb: 87040 + 4194304
            }
        );
        assert_eq!(sum_skmem("no sockets"), BufferSums::default());
        assert_eq!(sum_skmem("skmem:(rbx,tb"), BufferSums::default());
    }

    #[test]
    fn snmp_retransmissions() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 2 64\nTcp: RtoAlgorithm RtoMin OutSegs RetransSegs InErrs\nTcp: 1 200 5000 42 0\nUdp: InDatagrams\nUdp: 3\n";
        assert_eq!(retrans_segs(snmp), Some(42));
        assert_eq!(retrans_segs("Tcp: A\nTcp: 1\n"), None);
        assert_eq!(retrans_segs(""), None);
    }
}
