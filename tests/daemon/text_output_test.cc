// tests/daemon/text_output_test.cc: the fix block of scan's text output says whether a fix fits
// only when that is known (the card's usable memory), and never reads an unknown as an answer.
#include <doctest/doctest.h>

#include "daemon/render/text_output.h"
#include "triage/fix.h"

using namespace oomtriage;

TEST_SUITE("daemon::text_output") {
  TEST_CASE("a predicted peak without a card size is printed without a fit verdict") {
    triage::Fix fix;
    fix.id = "use_8bit_optimizer";
    fix.rank = 1;
    fix.title = "Use an 8-bit optimizer";
    fix.predicted_peak_bytes = uint64_t{19} << 30;
    std::string text = daemon::render_fixes_text({fix}, false);
    CHECK(text.find("peak: ~19.00 GiB\n") != std::string::npos);
    CHECK(text.find("fits") == std::string::npos);
    CHECK(text.find("not enough alone") == std::string::npos);

    fix.fits = true;
    text = daemon::render_fixes_text({fix}, false);
    CHECK(text.find("peak: ~19.00 GiB (fits)") != std::string::npos);
    fix.fits = false;
    text = daemon::render_fixes_text({fix}, false);
    CHECK(text.find("peak: ~19.00 GiB (not enough alone)") != std::string::npos);
  }
}
