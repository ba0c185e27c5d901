// daemon/common/guarded_run.h
//
// The event loop's last line of defence. A handler that throws would end io_context::run() and,
// uncaught, the process: every log's reading, every timer and every alert with it. Here the
// exception is handed to `failed` and the loop goes on; Asio allows run() to be called again
// after a handler's exception, with no restart() between.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <functional>
#include <string>

namespace oomtriage::daemon {

// Runs `io` until it is out of work or stopped; `failed` hears what each throwing handler said.
void run_guarded(boost::asio::io_context& io,
                 const std::function<void(const std::string& what)>& failed);

}  // namespace oomtriage::daemon
