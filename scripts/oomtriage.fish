# fish completion for oomtriage(1): subcommands, their options, files and job names.
set -l subcommands scan fix daemon watch jobs report top serve alert alerts run check check-config version
set -l trainers auto ai-toolkit sd-scripts diffusers simpletuner onetrainer transformers comfyui kohya
set -l fixes enable_gradient_checkpointing lower_batch_size drop_top_bucket lower_resolution \
    cheapen_previews disable_sampling skip_first_sample reduce_num_frames enable_low_vram \
    quantize_model quantize_text_encoder cache_text_embeddings unload_text_encoder \
    layer_offloading cache_latents_to_disk use_bf16 use_8bit_optimizer match_target_res \
    expandable_segments free_gpu reduce_host_memory increase_shm combined_plan
set -l outcomes crashed_oom crashed_other completed stopped running unknown

# The jobs the store knows, for `report`.
function __oomtriage_jobs
    oomtriage jobs --json 2>/dev/null | string replace -rf '^\s*"name": "(.*)",$' '$1'
end

function __oomtriage_in
    __fish_seen_subcommand_from $argv
end

complete -c oomtriage -f
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a scan -d 'Analyse logs once'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a fix -d 'Diff of the config that applies a fix'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a daemon -d 'Run the service'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a watch -d 'The daemon in the foreground'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a jobs -d 'Jobs in the store'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a report -d 'The story of one job'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a top -d 'A live view of the jobs'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a serve -d 'A read-only web view'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a alert -d 'Alert receivers'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a alerts -d 'The alert outbox'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a run -d 'Run a trainer, heal it'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a check -d 'Will the job fit the GPU'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a check-config -d 'Check a daemon config'
complete -c oomtriage -n "not __fish_seen_subcommand_from $subcommands" -a version -d 'Print the version'

complete -c oomtriage -l state-dir -x -a '(__fish_complete_directories)' -d 'Where the store lives'
complete -c oomtriage -l store -x -d 'SQLite file or postgresql:// URL'
complete -c oomtriage -l verbose -d 'Say more on stderr'
complete -c oomtriage -l color -x -a 'auto always never' -d 'Colour the output'
complete -c oomtriage -s h -l help -d 'Help'
complete -c oomtriage -l version -d 'Version'

complete -c oomtriage -n '__oomtriage_in scan' -F
complete -c oomtriage -n '__oomtriage_in scan fix check-config run daemon jobs report top serve alert' -l config -r -F -d 'A job or daemon config'
complete -c oomtriage -n '__oomtriage_in scan run check' -l trainer -x -a "$trainers"
complete -c oomtriage -n '__oomtriage_in scan jobs report alerts check' -l json -d 'Print JSON'
complete -c oomtriage -n '__oomtriage_in scan' -l fail-on-oom -d 'Exit 3 on a fatal OOM'
complete -c oomtriage -n '__oomtriage_in scan' -s f -l follow -d 'Print incidents as they happen'
complete -c oomtriage -n '__oomtriage_in scan' -l glob -x -d 'Which files of a folder'

complete -c oomtriage -n '__oomtriage_in fix' -F
complete -c oomtriage -n '__oomtriage_in fix' -l fix -x -a "$fixes" -d 'The fix to apply'
complete -c oomtriage -n '__oomtriage_in fix' -l rank -x -d 'The fix ranked N'
complete -c oomtriage -n '__oomtriage_in fix' -l write -r -F -d 'Write the patched config'

complete -c oomtriage -n '__oomtriage_in daemon watch' -l backfill -d 'Read present logs from 0'
complete -c oomtriage -n '__oomtriage_in watch' -a '(__fish_complete_directories)'
complete -c oomtriage -n '__oomtriage_in watch run' -l webhook -x -d 'A webhook URL'

complete -c oomtriage -n '__oomtriage_in jobs report top serve' -l host -x -d 'A node of the fleet store'
complete -c oomtriage -n '__oomtriage_in jobs' -l phase -x -a 'model_load quantize cache_latents cache_text_embeddings train_step sampling saving unknown'
complete -c oomtriage -n '__oomtriage_in jobs' -l trainer -x -a "$trainers" -d 'Only this trainer'
complete -c oomtriage -n '__oomtriage_in jobs' -l family -x -d 'Only this model family'
complete -c oomtriage -n '__oomtriage_in jobs' -l name -x -d 'Name holds this text'
complete -c oomtriage -n '__oomtriage_in jobs' -l since -x -a '1h 24h 7d' -d 'Seen this recently'
complete -c oomtriage -n '__oomtriage_in jobs' -l outcome -x -a "$outcomes"
complete -c oomtriage -n '__oomtriage_in jobs' -l limit -x -d 'At most N jobs'

complete -c oomtriage -n '__oomtriage_in report' -a '(__oomtriage_jobs)'
complete -c oomtriage -n '__oomtriage_in report' -l markdown -d 'Markdown for chat'
complete -c oomtriage -n '__oomtriage_in report' -l html -r -F -d 'Write an HTML page'
complete -c oomtriage -n '__oomtriage_in report' -F

complete -c oomtriage -n '__oomtriage_in top' -l once -d 'One frame, then exit'
complete -c oomtriage -n '__oomtriage_in top' -l interval -x -d 'Seconds between refreshes'

complete -c oomtriage -n '__oomtriage_in serve' -l listen -x -d 'Address and port'
complete -c oomtriage -n '__oomtriage_in serve' -l access-file -r -F -d 'Tokens and users'
complete -c oomtriage -n '__oomtriage_in serve' -l allow-writer-role -d 'Serve a role that can write'
complete -c oomtriage -n '__oomtriage_in serve' -l threads -x -d 'Requests at once'
complete -c oomtriage -n '__oomtriage_in serve' -l max-connections -x -d 'Clients at once'
complete -c oomtriage -n '__oomtriage_in serve' -l max-per-address -x -d 'Connections from one address'
complete -c oomtriage -n '__oomtriage_in serve' -l header-timeout -x -d 'Seconds to send the headers'
complete -c oomtriage -n '__oomtriage_in serve' -l client-timeout -x -d 'Seconds to send a request'
complete -c oomtriage -n '__oomtriage_in serve' -l days -x -d 'Days /fleet draws'

complete -c oomtriage -n '__oomtriage_in alert' -a test -d 'Send a test alert'
complete -c oomtriage -n '__oomtriage_in alert' -l receiver -x -d 'Only this receiver'
complete -c oomtriage -n '__oomtriage_in alerts' -a resend -d 'Send an alert again'
complete -c oomtriage -n '__oomtriage_in alerts' -l pending -d 'Only waiting ones'
complete -c oomtriage -n '__oomtriage_in alerts' -l failed -d 'Only failed ones'

complete -c oomtriage -n '__oomtriage_in check' -F
complete -c oomtriage -n '__oomtriage_in check' -l spec -r -F -d 'A spec JSON file'
complete -c oomtriage -n '__oomtriage_in check' -l gpu -x -a 'auto 8GiB 12GiB 16GiB 24GiB 32GiB 40GiB 48GiB 80GiB' -d 'The card (auto: NVML)'
complete -c oomtriage -n '__oomtriage_in check' -l model -r -d 'The model family'
complete -c oomtriage -n '__oomtriage_in check' -l explain -d 'Print the spec read'
complete -c oomtriage -n '__oomtriage_in check-config' -F
complete -c oomtriage -n '__oomtriage_in run' -l heal -d 'Restart with the next fix after an OOM'
complete -c oomtriage -n '__oomtriage_in run' -l max-attempts -x -d 'Attempts in all'
complete -c oomtriage -n '__oomtriage_in run' -l job -x -d 'The job name'
complete -c oomtriage -n '__oomtriage_in run' -l log -r -F -d 'Also write the output here'
complete -c oomtriage -n '__oomtriage_in run' -l backoff -x -d 'Seconds before a restart'
complete -c oomtriage -n '__oomtriage_in run' -l daemon-config -r -F -d 'Alert as this daemon config says'
complete -c oomtriage -n '__oomtriage_in run' -l gpu -x -a 'auto' -d 'Judge the config against a GPU of this size'
