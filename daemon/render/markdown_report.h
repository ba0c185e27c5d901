// daemon/render/markdown_report.h
//
// `oomtriage report JOB --markdown`: a compact version of the job's story for a chat message or a
// ticket: the verdict, the memory at the crash, the runs as a table and the top fixes as diffs.
// GitHub-flavoured Markdown, which Slack, Discord, GitLab and Jira's editors read.
#pragma once

#include <string>

#include "daemon/render/report_view.h"

namespace oomtriage::daemon {

std::string render_markdown_report(const ReportView& report);

}  // namespace oomtriage::daemon
