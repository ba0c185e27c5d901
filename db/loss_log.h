// db/loss_log.h
//
// AI Toolkit's loss database, <job folder>/loss_log.db (written when logging.use_ui_logger is on;
// docs/ai-toolkit.md §4.5): the training loss at each step, for the HTML report's curve.
// Read-only, while the trainer may be writing it (WAL).
#pragma once

#include <string>
#include <vector>

#include "parsers/loss_curve.h"
#include "parsers/result.h"

namespace oomtriage::db {

// The `loss/loss` metric by step. AI Toolkit stores its 0-based step_num; the points carry the
// step its bar shows once that step is done (step_num + 1), the scale crashes are reported in.
Result<std::vector<parsers::LossPoint>> read_aitk_loss_log(const std::string& path);

}  // namespace oomtriage::db
