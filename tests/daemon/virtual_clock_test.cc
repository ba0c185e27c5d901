// tests/daemon/virtual_clock_test.cc
//
// The clock seam (daemon/common/clock.h): the virtual clock the loop's tests run on fires its
// timers in the order of their deadlines, each at its own time, runs what a handler arms before
// the next, completes a wait already due at once, and cancels as Asio does; the real clock's
// timers are Asio's.
#include <doctest/doctest.h>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/common/clock.h"
#include "tests/support/virtual_clock.h"

using namespace oomtriage;
using namespace std::chrono_literals;

TEST_SUITE("daemon::clock") {
  TEST_CASE("virtual time: timers fire in deadline order, each at its deadline, chains unfold") {
    boost::asio::io_context io;
    testing::VirtualClock clock(io);
    const auto start = clock.now();
    const int64_t unix_start = clock.unix_now();
    std::vector<std::string> fired;
    auto late = clock.timer(io);
    auto early = clock.timer(io);
    auto chained = clock.timer(io);
    late->expires_after(300ms);
    late->async_wait([&](const boost::system::error_code& ec) {
      CHECK_FALSE(ec);
      CHECK(clock.now() - start == 300ms);
      fired.push_back("late");
    });
    early->expires_after(100ms);
    early->async_wait([&](const boost::system::error_code& ec) {
      CHECK_FALSE(ec);
      CHECK(clock.now() - start == 100ms);
      fired.push_back("early");
      // Armed by a handler: due before `late`, so it fires first within the same advance.
      chained->expires_after(150ms);
      chained->async_wait([&](const boost::system::error_code& e) {
        CHECK_FALSE(e);
        CHECK(clock.now() - start == 250ms);
        fired.push_back("chained");
      });
    });
    clock.advance(99ms);
    CHECK(fired.empty());  // nothing moves before its time
    clock.advance(1s);
    CHECK(fired == std::vector<std::string>{"early", "chained", "late"});
    CHECK(clock.now() - start == 1099ms);
    CHECK(clock.unix_now() == unix_start + 1);
    CHECK_FALSE(clock.next_due());
  }

  TEST_CASE(
      "virtual time: cancel and a moved expiry abort the wait - a due wait completes at once") {
    boost::asio::io_context io;
    testing::VirtualClock clock(io);
    auto timer = clock.timer(io);
    std::vector<boost::system::error_code> results;
    const auto record = [&](const boost::system::error_code& ec) { results.push_back(ec); };
    timer->expires_after(1s);
    timer->async_wait(record);
    timer->cancel();
    io.poll();
    REQUIRE(results.size() == 1);
    CHECK(results[0] == boost::asio::error::operation_aborted);
    timer->async_wait(record);
    timer->expires_after(2s);  // moving the expiry aborts the pending wait, as Asio's does
    io.restart();
    io.poll();
    REQUIRE(results.size() == 2);
    CHECK(results[1] == boost::asio::error::operation_aborted);
    timer->expires_after(0ms);
    timer->async_wait(record);
    io.restart();
    io.poll();  // no advance needed
    REQUIRE(results.size() == 3);
    CHECK_FALSE(results[2]);
    // Destroyed with a wait pending: the handler is dropped, never called.
    timer->expires_after(1s);
    timer->async_wait(record);
    timer.reset();
    clock.advance(2s);
    CHECK(results.size() == 3);
  }

  TEST_CASE("the real clock: Asio's steady timer on the steady clock") {
    boost::asio::io_context io;
    daemon::LoopClock& clock = daemon::real_clock();
    auto timer = clock.timer(io);
    const auto before = std::chrono::steady_clock::now();
    bool fired = false;
    timer->expires_after(20ms);
    timer->async_wait([&](const boost::system::error_code& ec) { fired = !ec; });
    io.run();
    CHECK(fired);
    CHECK(clock.now() - before >= 20ms);
    CHECK(std::abs(clock.unix_now() - daemon::unix_now()) <= 1);
  }
}
