// tests/parsers/launcher_test.cc: the launchers' words (parsers/launcher.h), DeepSpeed's and
// accelerate's files (parsers/distributed_config.h) and the LLM trainers' readers
// (parsers/llm_config.h), on command lines and configs written as their docs write them.
#include <doctest/doctest.h>

#include "parsers/distributed_config.h"
#include "parsers/launcher.h"
#include "parsers/llm_config.h"

using namespace oomtriage::parsers;

TEST_SUITE("launcher") {
  TEST_CASE("accelerate launch with DeepSpeed ZeRO-3 and offload over 4 processes") {
    const LaunchedCommand l = read_launcher(
        {"accelerate", "launch", "--num_processes", "4", "--use_deepspeed", "--zero_stage=3",
         "--offload_optimizer_device", "cpu", "train_dreambooth_lora_flux.py", "--rank", "16"});
    CHECK(l.launcher == "accelerate");
    CHECK(l.setup.processes == 4);
    CHECK(l.setup.sharding == "zero3");
    CHECK(l.setup.offload_optimizer == "cpu");
    CHECK(!l.setup.offload_params);
    REQUIRE(l.trainer_argv.size() == 3);
    CHECK(l.trainer_argv[0] == "train_dreambooth_lora_flux.py");
  }

  TEST_CASE("torchrun, python -m torch.distributed.run and deepspeed count their GPUs") {
    CHECK(read_launcher({"torchrun", "--nproc_per_node=8", "run_clm.py"}).setup.processes == 8);
    // Per machine: 8 GPUs on each of 2 machines are 16 processes.
    CHECK(read_launcher({"torchrun", "--nnodes", "2", "--nproc_per_node", "8", "run_clm.py"})
              .setup.processes == 16);
    // The launcher alone does not say DDP: the trainer's config may shard (the model's default
    // on more than one GPU is DDP).
    const LaunchedCommand t =
        read_launcher({"torchrun", "--nproc-per-node", "2", "--standalone", "x.py"});
    CHECK(t.setup.processes == 2);
    CHECK(!t.setup.sharding);
    const LaunchedCommand m = read_launcher(
        {"python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py", "--a"});
    CHECK(m.setup.processes == 2);
    CHECK(m.trainer_argv.front() == "train.py");
    const LaunchedCommand d = read_launcher(
        {"deepspeed", "--num_gpus", "4", "run_clm.py", "--deepspeed", "ds_z3.json", "--bf16"});
    CHECK(d.setup.processes == 4);
    CHECK(d.setup.deepspeed_config == "ds_z3.json");
  }

  TEST_CASE("environment assignments before the command and a module launch") {
    const LaunchedCommand l =
        read_launcher({"CUDA_VISIBLE_DEVICES=0,1", "accelerate", "launch", "--config_file",
                       "fsdp.yaml", "src/train.py", "cfg.yaml"});
    CHECK(l.setup.visible_gpus == 2);
    CHECK(l.setup.accelerate_config == "fsdp.yaml");
    const LaunchedCommand a =
        read_launcher({"accelerate", "launch", "--multi_gpu", "--num_processes", "2", "-m",
                       "axolotl.cli.train", "x.yaml"});
    CHECK(a.setup.processes == 2);
    CHECK(!a.setup.sharding);
    CHECK(a.trainer_argv == std::vector<std::string>{"axolotl.cli.train", "x.yaml"});
    // No launcher: the whole command is the trainer's.
    CHECK(read_launcher({"python", "train.py", "--x", "1"}).trainer_argv.size() == 4);
    CHECK(!read_launcher({"python", "train.py"}).setup.any());
  }

  TEST_CASE("HF Trainer's --fsdp words") {
    const LaunchedCommand l = read_launcher({"torchrun", "--nproc_per_node", "4", "run_clm.py",
                                             "--fsdp", "full_shard auto_wrap offload"});
    CHECK(l.setup.sharding == "fsdp_full");
    CHECK(l.setup.offload_params == "cpu");
    CHECK(sharding_of_fsdp_words("shard_grad_op auto_wrap") == "fsdp_grad_op");
    CHECK(!sharding_of_fsdp_words("auto_wrap"));
  }

  TEST_CASE("a DeepSpeed JSON's stage and offload - auto stays unset") {
    auto ds = read_deepspeed_config(
        R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
            "offload_param": {"device": "nvme"}}, "train_batch_size": "auto"})",
        "ds.json");
    REQUIRE(ds);
    CHECK(ds->sharding == "zero3");
    CHECK(ds->offload_optimizer == "cpu");
    CHECK(ds->offload_params == "nvme");
    auto z2 = read_deepspeed_config(R"({"zero_optimization": {"stage": "auto"}})", "ds.json");
    REQUIRE(z2);
    CHECK(!z2->sharding);
    CHECK(!read_deepspeed_config("{not json", "ds.json"));
  }

  TEST_CASE("an accelerate YAML: FSDP, DeepSpeed, multi-GPU") {
    auto fsdp = read_accelerate_config(
        "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sharding_strategy: "
        "SHARD_GRAD_OP\n  fsdp_offload_params: false\n",
        "a.yaml");
    REQUIRE(fsdp);
    CHECK(fsdp->processes == 2);
    CHECK(fsdp->sharding == "fsdp_grad_op");
    CHECK(!fsdp->offload_params);
    auto ds = read_accelerate_config(
        "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 2\n  "
        "offload_optimizer_device: cpu\n",
        "a.yaml");
    REQUIRE(ds);
    CHECK(ds->sharding == "zero2");
    CHECK(ds->offload_optimizer == "cpu");
    auto ddp = read_accelerate_config("distributed_type: MULTI_GPU\nnum_processes: 4\n", "a.yaml");
    REQUIRE(ddp);
    CHECK(ddp->sharding == "ddp");
  }
}

TEST_SUITE("llm_config") {
  TEST_CASE("an axolotl QLoRA config with its defaults") {
    const auto job = read_llm_config(nlohmann::json::parse(R"({
      "base_model": "NousResearch/Meta-Llama-3-8B", "load_in_4bit": true, "adapter": "qlora",
      "sequence_len": 4096, "sample_packing": true, "lora_r": 32, "lora_target_linear": true,
      "micro_batch_size": 2, "optimizer": "paged_adamw_32bit", "bf16": "auto",
      "gradient_checkpointing": true, "deepspeed": "deepspeed_configs/zero2.json"})"));
    REQUIRE(job);
    CHECK(job->reader == "axolotl");
    CHECK(job->training == "lora");
    CHECK(job->quantization == "nf4_double_quant");
    CHECK(job->lora_rank == 32);
    CHECK(job->lora_targets == std::vector<std::string>{"all-linear"});
    CHECK(job->sequence_length == 4096);
    CHECK(job->micro_batch == 2);
    CHECK(job->dtype == "bf16");
    CHECK(job->optimizer == "paged_adamw_32bit");
    CHECK(job->distributed.deepspeed_config == "deepspeed_configs/zero2.json");
    // No adapter: a full fine-tune; sequence_len's default said.
    const auto full = read_llm_config(nlohmann::json::parse(R"({"base_model": "x/llama-3-8b",
      "micro_batch_size": 1, "bf16": true})"));
    REQUIRE(full);
    CHECK(full->training == "full");
    CHECK(full->sequence_length == 512);
    CHECK(full->weights_dtype == "bf16");
    CHECK(!full->defaults.empty());
  }

  TEST_CASE("LLaMA-Factory: finetuning_type, quantization_bit, cutoff_len, pure_bf16") {
    const auto job = read_llm_config(nlohmann::json::parse(R"({
      "model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "stage": "sft",
      "finetuning_type": "full", "cutoff_len": 1024, "per_device_train_batch_size": 2,
      "bf16": true, "deepspeed": "examples/deepspeed/ds_z3_config.json"})"));
    REQUIRE(job);
    CHECK(job->reader == "llama-factory");
    CHECK(job->training == "full");
    CHECK(job->weights_dtype == "fp32");
    CHECK(job->gradient_checkpointing == true);
    const auto pure = read_llm_config(nlohmann::json::parse(R"({
      "model_name_or_path": "Qwen/Qwen2.5-7B", "finetuning_type": "full", "pure_bf16": true})"));
    REQUIRE(pure);
    CHECK(pure->weights_dtype == "bf16");
    const auto q = read_llm_config(nlohmann::json::parse(R"({
      "model_name_or_path": "Qwen/Qwen2.5-7B", "template": "qwen", "quantization_bit": 4})"));
    REQUIRE(q);
    CHECK(q->training == "lora");
    CHECK(q->quantization == "nf4_double_quant");
  }

  TEST_CASE("trl sft's command line: 14 arguments read, TRL's defaults beside them") {
    const auto job = read_llm_command({"trl", "sft", "--model_name_or_path", "Qwen/Qwen2.5-0.5B",
                                       "--dataset_name", "trl-lib/Capybara", "--use_peft",
                                       "--lora_r", "32", "--lora_target_modules", "q_proj",
                                       "v_proj", "--load_in_4bit", "--per_device_train_batch_size",
                                       "4", "--max_length", "2048", "--output_dir", "out"});
    REQUIRE(job);
    CHECK(job->reader == "trl");
    CHECK(job->model == "Qwen/Qwen2.5-0.5B");
    CHECK(job->lora_targets == std::vector<std::string>{"q_proj", "v_proj"});
    CHECK(job->quantization == "nf4");
    CHECK(job->micro_batch == 4);
    CHECK(job->sequence_length == 2048);
    CHECK(job->gradient_checkpointing == true);  // TRL's default
    CHECK(job->dtype == "bf16");                 // TRL's default
  }

  TEST_CASE("run_clm.py: HF Trainer's defaults (fp32, no checkpointing, batch 8)") {
    const auto job = read_llm_command({"python", "run_clm.py", "--model_name_or_path",
                                       "meta-llama/Meta-Llama-3-8B", "--do_train"});
    REQUIRE(job);
    CHECK(job->reader == "transformers");
    CHECK(job->training == "full");
    CHECK(job->micro_batch == 8);
    CHECK(job->sequence_length == 1024);
    CHECK(job->gradient_checkpointing == false);
    CHECK(job->weights_dtype == "fp32");
    // A diffusers script is not an LLM trainer's.
    CHECK(!read_llm_command({"accelerate", "launch", "train_dreambooth_lora_flux.py",
                             "--pretrained_model_name_or_path", "black-forest-labs/FLUX.1-dev"}));
  }

  TEST_CASE("a config file a CLI names is read, its command line's words win") {
    const auto loader = [](const std::string& path) -> std::optional<nlohmann::json> {
      if (path != "cfg.yaml") return std::nullopt;
      return nlohmann::json::parse(
          R"({"base_model": "meta-llama/Llama-2-7b-hf", "adapter": "lora", "micro_batch_size": 2})");
    };
    const auto job =
        read_llm_command({"axolotl", "train", "cfg.yaml", "--micro_batch_size", "4"}, loader);
    REQUIRE(job);
    CHECK(job->reader == "axolotl");
    CHECK(job->micro_batch == 4);
    CHECK(!read_llm_command({"axolotl", "train", "missing.yaml"}, loader));
  }

  TEST_CASE("an unsloth Studio YAML") {
    const auto job = read_llm_config(nlohmann::json::parse(R"({
      "model": "unsloth/Qwen2.5-0.5B",
      "training": {"training_type": "lora", "max_seq_length": 2048, "load_in_4bit": true,
                   "batch_size": 2, "gradient_checkpointing": "unsloth"},
      "lora": {"lora_r": 64, "target_modules": "q_proj,k_proj,v_proj"}})"));
    REQUIRE(job);
    CHECK(job->reader == "unsloth");
    CHECK(job->checkpoints_offloaded);
    CHECK(job->fused_loss == true);
    CHECK(job->lora_targets->size() == 3);
    // An image trainer's config is not read here.
    CHECK(!read_llm_config(nlohmann::json::parse(R"({"config": {"process": []}})")));
    CHECK(!read_llm_config(nlohmann::json::parse(
        R"({"pretrained_model_name_or_path": "black-forest-labs/FLUX.1-dev"})")));
  }
}
