// tests/support/heal_job.h: the AI Toolkit job the `run --heal` tests heal with the fake trainer
// (tests/fake_trainers/ai_toolkit.py), for tests/daemon/run_command_test.cc and
// run_heal_files_test.cc.
#pragma once

#include <filesystem>
#include <string>

namespace oomtriage::testing {

// A Flex.1 LoRA that fits 15 GiB only with cheaper previews (it dies sampling at step 150) and
// without its 1024 px bucket (then it dies in a training step at step 200); saves every 100
// steps into `dir`/output. Its rank (`linear: 16`) is the user's to edit: the fake trainer's
// memory ignores it.
inline std::string heal_job_text(const std::filesystem::path& dir, const std::string& name) {
  return "job: extension\n"
         "config:\n"
         "  name: " +
         name +
         "\n"
         "  process:\n"
         "    - type: sd_trainer\n"
         "      training_folder: " +
         (dir / "output").string() +
         "\n"
         "      network:\n"
         "        type: lora\n"
         "        linear: 16\n"
         "      save:\n"
         "        save_every: 100\n"
         "      datasets:\n"
         "        - folder_path: /data/images\n"
         "          resolution: [512, 768, 1024]\n"
         "      train:\n"
         "        batch_size: 1\n"
         "        steps: 400\n"
         "        gradient_checkpointing: true\n"
         "        cache_text_embeddings: true\n"
         "        dtype: bf16\n"
         "      model:\n"
         "        name_or_path: ostris/Flex.1-alpha\n"
         "        quantize: true\n"
         "      sample:\n"
         "        sample_every: 150\n"
         "        width: 1024\n"
         "        height: 1024\n"
         "        sample_steps: 20\n";
}

}  // namespace oomtriage::testing
