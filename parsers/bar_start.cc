// parsers/bar_start.cc: record by record until the training bar's first frame is parsed.
#include "parsers/bar_start.h"

namespace oomtriage::parsers {

void feed_until_bar_start(LogAnalyzer& analyzer, std::string_view bytes,
                          std::optional<int64_t>& start) {
  while (!bytes.empty() && !start) {
    const size_t end = bytes.find_first_of("\r\n");
    const size_t take = end == std::string_view::npos ? bytes.size() : end + 1;
    analyzer.feed(bytes.substr(0, take));
    bytes.remove_prefix(take);
    (void)analyzer.take_events();  // parses the waiting frame: the bar's position is known
    start = analyzer.training_step();
  }
  analyzer.feed(bytes);
}

}  // namespace oomtriage::parsers
