// The simulated board of `vtakit board-sim`: the board design's Verilator model (VTA,
// on-chip DRAM, UART host bridge) with its UART pins driven at the bit level from a
// TCP socket, so a host talks to it exactly as to a board's serial port (pyserial
// socket://HOST:PORT). One client at a time; the board keeps its state between clients,
// as a real board does. Serves until killed.
//
// Time: the design is clocked while anything happens (bytes to send or receive, a VTA
// run, a reply, DRAM zeroing). When a frame stops half-way, the simulation waits 2 ms of
// wall time for the rest before clocking on (so a TCP gap is not taken for a lost byte,
// and the bridge's idle timeout runs in simulated time after that). When nothing
// happens it sleeps in poll().
//
// Built by vtakit.sim.board_sim with -DCPB=<clock cycles per UART bit>.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "Vboard_top.h"
#include "verilated.h"

#ifndef CPB
#error "compile with -DCPB=<cycles per bit>"
#endif

enum : unsigned { LED_RUNNING = 2, LED_FRAMING = 4, LED_BUSY = 8 };

class Board {
public:
    Board() : top_(new Vboard_top(&ctx_)) {
        top_->uart_rx = 1;
        top_->rst = 1;
        for (int i = 0; i < 4; i++) tick();
        top_->rst = 0;
    }
    ~Board() { top_->final(); delete top_; }

    // One clock cycle: drive the UART input, clock, decode the UART output.
    void tick() {
        if (tx_bit_ < 0 && !to_board.empty()) {
            tx_frame_ = (1u << 9) | (unsigned(to_board.front()) << 1);
            to_board.pop_front();
            tx_bit_ = 0;
            tx_timer_ = CPB;
        }
        top_->uart_rx = tx_bit_ < 0 ? 1 : (tx_frame_ >> tx_bit_) & 1;
        if (tx_bit_ >= 0 && --tx_timer_ == 0) {
            tx_timer_ = CPB;
            if (++tx_bit_ == 10) tx_bit_ = -1;
        }
        top_->clk = 0;
        top_->eval();
        top_->clk = 1;
        top_->eval();
        bool line = top_->uart_tx;
        if (rx_state_ == 0) {
            if (!line) { rx_state_ = 1; rx_timer_ = CPB + CPB / 2; rx_bits_ = 0; rx_value_ = 0; }
        } else if (--rx_timer_ == 0) {
            if (rx_bits_ < 8) {
                rx_value_ |= unsigned(line) << rx_bits_++;
                rx_timer_ = CPB;
            } else {           // the stop bit
                if (line) from_board.push_back(char(rx_value_));
                rx_state_ = 0;
            }
        }
    }

    bool line_busy() const { return tx_bit_ >= 0 || rx_state_ != 0 || !to_board.empty(); }
    unsigned leds() const { return top_->leds; }

    std::deque<unsigned char> to_board;
    std::string from_board;

private:
    VerilatedContext ctx_;
    Vboard_top *top_;
    int tx_bit_ = -1, tx_timer_ = 0;
    unsigned tx_frame_ = 0;
    int rx_state_ = 0, rx_timer_ = 0, rx_bits_ = 0;
    unsigned rx_value_ = 0;
};

static bool receive(int fd, Board &b) {
    unsigned char buf[65536];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0) { b.to_board.insert(b.to_board.end(), buf, buf + n); continue; }
        if (n == 0) return false;
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
}

static bool flush(int fd, Board &b) {
    while (!b.from_board.empty()) {
        ssize_t n = send(fd, b.from_board.data(), b.from_board.size(), MSG_NOSIGNAL);
        if (n > 0) { b.from_board.erase(0, n); continue; }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            pollfd p{fd, POLLOUT, 0};
            poll(&p, 1, 100);
            continue;
        }
        return false;
    }
    return true;
}

static void serve(int fd, Board &b) {
    bool starved = false;
    for (;;) {
        unsigned leds = b.leds();
        bool active = b.line_busy() || (leds & (LED_RUNNING | LED_BUSY));
        int wait_ms = 0;
        if (!active) wait_ms = (leds & LED_FRAMING) ? (starved ? 0 : 2) : 200;
        pollfd p{fd, POLLIN, 0};
        int r = poll(&p, 1, wait_ms);
        if (r > 0) {
            if (!receive(fd, b)) return;
            starved = false;
        } else if (!active && (leds & LED_FRAMING)) {
            starved = true;
        } else if (!active) {
            continue;   // nothing to simulate: sleep again
        }
        for (int i = 0; i < 4096; i++) {
            b.tick();
            if (!b.line_busy() && !(b.leds() & (LED_RUNNING | LED_BUSY)) &&
                !(starved && (b.leds() & LED_FRAMING)))
                break;
        }
        if (!flush(fd, b)) return;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s HOST PORT\n", argv[0]);
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(std::atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        std::fprintf(stderr, "board-sim: %s is not an IPv4 address\n", argv[1]);
        return 2;
    }
    if (bind(ls, (sockaddr *)&addr, sizeof addr) != 0 || listen(ls, 1) != 0) {
        std::fprintf(stderr, "board-sim: cannot listen on %s:%s: %s\n", argv[1], argv[2],
                     std::strerror(errno));
        return 2;
    }
    socklen_t len = sizeof addr;
    getsockname(ls, (sockaddr *)&addr, &len);
    Board board;
    std::printf("board-sim: listening on %s:%d\n", argv[1], ntohs(addr.sin_port));
    std::fflush(stdout);
    for (;;) {
        int fd = accept(ls, nullptr, nullptr);
        if (fd < 0) continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        serve(fd, board);
        close(fd);
    }
}
