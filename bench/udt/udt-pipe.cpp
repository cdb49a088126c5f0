// udt-pipe: UDT4 (Debian's libudt) moving N bytes memory to memory, the UDT baseline of
// bench/udp-experiments.sh (Debian ships the library but not UDT4's example programs).
//   udt-pipe send PORT BYTES     listen on PORT, send BYTES to the first peer, wait for its ack
//   udt-pipe recv HOST PORT BYTES connect, take BYTES, ack; prints Mbit/s and UDT's loss counters
// Buffers are large (the path's BDP is far below them); the kernel's UDP buffers are what
// net.core.rmem_max allows, as for any unprivileged program.
#include <udt/udt.h>
#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <vector>

static int fail(const char* what) {
    std::fprintf(stderr, "udt-pipe: %s: %s\n", what, UDT::getlasterror_desc());
    return 1;
}

static void big_buffers(UDTSOCKET s) {
    int udt_buf = 256 << 20, udp_buf = 64 << 20, window = 262144;
    UDT::setsockopt(s, 0, UDT_SNDBUF, &udt_buf, sizeof udt_buf);
    UDT::setsockopt(s, 0, UDT_RCVBUF, &udt_buf, sizeof udt_buf);
    UDT::setsockopt(s, 0, UDP_SNDBUF, &udp_buf, sizeof udp_buf);
    UDT::setsockopt(s, 0, UDP_RCVBUF, &udp_buf, sizeof udp_buf);
    UDT::setsockopt(s, 0, UDT_FC, &window, sizeof window);
}

static int send_side(int port, long long bytes) {
    UDTSOCKET l = UDT::socket(AF_INET, SOCK_STREAM, 0);
    big_buffers(l);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = INADDR_ANY;
    if (UDT::bind(l, (sockaddr*)&a, sizeof a) == UDT::ERROR) return fail("bind");
    if (UDT::listen(l, 1) == UDT::ERROR) return fail("listen");
    sockaddr_in peer{};
    int len = sizeof peer;
    UDTSOCKET s = UDT::accept(l, (sockaddr*)&peer, &len);
    if (s == UDT::INVALID_SOCK) return fail("accept");
    std::vector<char> block(1 << 20, 0);
    long long left = bytes;
    while (left > 0) {
        int n = UDT::send(s, block.data(), (int)std::min<long long>(left, block.size()), 0);
        if (n == UDT::ERROR) return fail("send");
        left -= n;
    }
    char ack;
    if (UDT::recv(s, &ack, 1, 0) == UDT::ERROR) return fail("waiting for the ack");
    UDT::TRACEINFO t;
    UDT::perfmon(s, &t);
    std::fprintf(stderr, "udt-pipe: sent %lld packets, %d retransmitted, %d reported lost\n",
                 (long long)t.pktSentTotal, t.pktRetransTotal, t.pktSndLossTotal);
    UDT::close(s);
    UDT::close(l);
    return 0;
}

static int recv_side(const char* host, const char* port, long long bytes) {
    addrinfo hints{}, *res;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        std::fprintf(stderr, "udt-pipe: cannot resolve %s\n", host);
        return 1;
    }
    UDTSOCKET s = UDT::socket(AF_INET, SOCK_STREAM, 0);
    big_buffers(s);
    if (UDT::connect(s, res->ai_addr, res->ai_addrlen) == UDT::ERROR) return fail("connect");
    freeaddrinfo(res);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<char> block(1 << 20);
    long long left = bytes;
    while (left > 0) {
        int n = UDT::recv(s, block.data(), (int)std::min<long long>(left, block.size()), 0);
        if (n == UDT::ERROR) return fail("recv");
        left -= n;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char ack = 1;
    if (UDT::send(s, &ack, 1, 0) == UDT::ERROR) return fail("ack");
    std::fprintf(stderr, "udt-pipe: %lld bytes in %.2f s, %.0f Mbit/s\n", bytes, secs,
                 bytes * 8 / secs / 1e6);
    UDT::close(s);
    return 0;
}

int main(int argc, char** argv) {
    UDT::startup();
    int rc = 2;
    if (argc == 4 && !std::strcmp(argv[1], "send"))
        rc = send_side(std::atoi(argv[2]), std::atoll(argv[3]));
    else if (argc == 5 && !std::strcmp(argv[1], "recv"))
        rc = recv_side(argv[2], argv[3], std::atoll(argv[4]));
    else
        std::fprintf(stderr, "usage: udt-pipe send PORT BYTES | udt-pipe recv HOST PORT BYTES\n");
    UDT::cleanup();
    return rc;
}
