// tests/support/browser.h
//
// Debian's headless Chromium for tests that check a page as a person sees it: a screenshot
// decoded to pixels (libpng), and the printed page's text (Chromium's PDF through pdftotext).
#pragma once

#include <png.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/files.h"
#include "tests/support/skip.h"

namespace oomtriage::testing {

struct Rgb {
  int r = 0, g = 0, b = 0;
  static Rgb hex(const char* text) {  // "#4c78a8"
    const unsigned long v = std::strtoul(text + 1, nullptr, 16);
    return {static_cast<int>(v >> 16 & 0xff), static_cast<int>(v >> 8 & 0xff),
            static_cast<int>(v & 0xff)};
  }
  bool near(const Rgb& o, int tolerance = 6) const {
    return std::abs(r - o.r) <= tolerance && std::abs(g - o.g) <= tolerance &&
           std::abs(b - o.b) <= tolerance;
  }
};

struct Screenshot {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
  Rgb at(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * width + x) * 3;
    return {rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

inline std::optional<Screenshot> read_png(const std::filesystem::path& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) return std::nullopt;
  image.format = PNG_FORMAT_RGB;
  Screenshot shot;
  shot.width = static_cast<int>(image.width);
  shot.height = static_cast<int>(image.height);
  shot.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, shot.rgb.data(), 0, nullptr)) return std::nullopt;
  return shot;
}

// Chromium with its own profile folder, so that tests running at once do not share one.
inline std::string chromium(const std::filesystem::path& scratch, const std::string& args) {
  return "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
         "--force-device-scale-factor=1 --user-data-dir='" +
         (scratch / "chromium-profile").string() + "' " + args + " >/dev/null 2>&1";
}

// `page` as Chromium is given it: a file, or an http:// URL as it is.
inline std::string url_of(const std::filesystem::path& page) {
  return page.string().starts_with("http://") ? page.string() : "file://" + page.string();
}

// The page's DOM once Chromium has loaded it, serialised.
inline std::string dumped_dom(const std::filesystem::path& page,
                              const std::filesystem::path& scratch) {
  const auto out = scratch / "dom.html";
  std::filesystem::remove(out);
  const std::string command =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir='" +
      (scratch / "chromium-profile").string() + "' --dump-dom '" + url_of(page) + "' >'" +
      out.string() + "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) return "";
  return slurp(out);
}

// A screenshot of `page` in a window `width` x `height`; `dark` asks for the dark scheme.
inline std::optional<Screenshot> screenshot(const std::filesystem::path& page,
                                            const std::filesystem::path& scratch, int width,
                                            int height, bool dark = false) {
  const auto png = scratch / (dark ? "dark.png" : "light.png");
  std::filesystem::remove(png);
  const std::string command = chromium(scratch, std::string(dark ? "--force-dark-mode " : "") +
                                                    "--window-size=" + std::to_string(width) + "," +
                                                    std::to_string(height) + " --screenshot='" +
                                                    png.string() + "' '" + url_of(page) + "'");
  if (std::system(command.c_str()) != 0 || !std::filesystem::exists(png)) return std::nullopt;
  return read_png(png);
}

// The text of `page` printed to PDF, as pdftotext lays it out.
inline std::string printed_text(const std::filesystem::path& page,
                                const std::filesystem::path& scratch) {
  const auto pdf = scratch / "page.pdf";
  const auto text = scratch / "page.txt";
  const std::string print = chromium(scratch, "--no-pdf-header-footer --print-to-pdf='" +
                                                  pdf.string() + "' '" + url_of(page) + "'");
  if (std::system(print.c_str()) != 0) return "";
  const std::string extract = "pdftotext -layout '" + pdf.string() + "' '" + text.string() + "'";
  if (std::system(extract.c_str()) != 0) return "";
  return slurp(text);
}

}  // namespace oomtriage::testing
