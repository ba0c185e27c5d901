// daemon/common/guarded_run.cc: io_context::run() that outlives a throwing handler.
#include "daemon/common/guarded_run.h"

#include <exception>

namespace oomtriage::daemon {

void run_guarded(boost::asio::io_context& io,
                 const std::function<void(const std::string& what)>& failed) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& error) {
      failed(error.what());
    } catch (...) {
      failed("an exception that is not a std::exception");
    }
  }
}

}  // namespace oomtriage::daemon
