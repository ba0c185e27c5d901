#compdef oomtriage
# zsh completion for oomtriage(1): subcommands, their options, files and job names.
_oomtriage() {
  local -a subcommands=(scan fix daemon watch jobs report top serve alert alerts run check check-config version)
  local -a global=(--state-dir --store --verbose --color --help --version)
  local -a trainers=(auto ai-toolkit sd-scripts diffusers simpletuner onetrainer transformers
                     comfyui kohya)
  local -a fixes=(enable_gradient_checkpointing lower_batch_size drop_top_bucket lower_resolution
                  cheapen_previews disable_sampling skip_first_sample reduce_num_frames
                  enable_low_vram quantize_model quantize_text_encoder cache_text_embeddings
                  unload_text_encoder layer_offloading cache_latents_to_disk use_bf16
                  use_8bit_optimizer match_target_res expandable_segments free_gpu
                  reduce_host_memory increase_shm combined_plan)
  local -a outcomes=(crashed_oom crashed_other completed stopped running unknown)
  local sub="" w
  for w in ${words[2,CURRENT-1]}; do
    if (( ${subcommands[(Ie)$w]} )); then sub=$w; break; fi
  done
  case ${words[CURRENT-1]} in
    --state-dir) _files -/; return ;;
    --config|--write|--log|--daemon-config|--html|--access-file) _files; return ;;
    --phase) compadd model_load quantize cache_latents cache_text_embeddings train_step sampling \
               saving unknown; return ;;
    --outcome) compadd -a outcomes; return ;;
    --color) compadd auto always never; return ;;
    --spec) _files; return ;;
    --gpu) compadd auto 8GiB 12GiB 16GiB 24GiB 32GiB 40GiB 48GiB 80GiB; return ;;
    --trainer) compadd -a trainers; return ;;
    --fix) compadd -a fixes; return ;;
  esac
  case $sub in
    "") compadd -a subcommands global ;;
    scan) compadd -- --config --trainer --json --fail-on-oom --follow -f --glob $global; _files ;;
    fix) compadd -- --config --fix --rank --write $global; _files ;;
    daemon) compadd -- --config --backfill $global ;;
    watch) compadd -- --webhook --backfill $global; _files -/ ;;
    jobs) compadd -- --json --since --outcome --phase --trainer --family --name --limit --host \
            --config $global ;;
    serve) compadd -- --listen --access-file --allow-writer-role --threads --max-connections \
             --max-per-address --header-timeout --client-timeout --days --host --config $global ;;
    report)
      local -a jobs=(${(f)"$(oomtriage jobs --json 2>/dev/null | sed -n 's/^ *"name": "\(.*\)",$/\1/p')"})
      compadd -- --json --markdown --html --host --config $global $jobs; _files ;;
    top) compadd -- --once --interval --host --config $global ;;
    alert) compadd -- test --config --receiver $global ;;
    alerts) compadd -- resend --pending --failed --json $global ;;
    check) compadd -- --spec --trainer --gpu --model --json --explain $global; _files ;;
    check-config) compadd -- $global; _files ;;
    run) compadd -- --heal --max-attempts --job --trainer --config --log --backoff --daemon-config \
           --webhook --gpu $global ;;
  esac
}

if [[ $funcstack[1] == _oomtriage ]]; then
  _oomtriage "$@"
else
  compdef _oomtriage oomtriage
fi
