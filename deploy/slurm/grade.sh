#!/usr/bin/env bash
# Grade a cohort on a Slurm cluster: N array tasks each grade one shard (make grade SHARD=i/N), then
# one job joins them (make merge) into OUT/, as one run over the whole cohort writes it.
#   deploy/slurm/grade.sh N        from the course's folder, on a node that submits jobs
# SUBMISSIONS (default submitted/), OUT (default grades/) and LAB as for make grade; the jobs see
# them (sbatch passes the environment on). Shard i writes OUT/shards/i/, its log
# OUT/shards/slurm-<job>_<i>.log. Resources per task: shard.sbatch's #SBATCH lines. To grade one
# shard again (it resumes), then merge:
#   sbatch --array=<i> deploy/slurm/shard.sbatch N;  sbatch deploy/slurm/merge.sbatch N
set -euo pipefail
cd "$(dirname "$0")/../.."
shards=${1:?"how many shards: deploy/slurm/grade.sh N"}
export OUT=${OUT:-grades}
mkdir -p "$OUT/shards"
# Build .venv once, here: N tasks starting together on a shared file system would race to build it.
make --no-print-directory setup
array=$(sbatch --parsable --array=1-"$shards" --output="$OUT/shards/slurm-%A_%a.log" deploy/slurm/shard.sbatch "$shards")
array=${array%%;*}  # a federated cluster answers <id>;<cluster>
# afterany: a shard that failed is named by the merge.
merge=$(sbatch --parsable --dependency=afterany:"$array" --output="$OUT/shards/slurm-%j-merge.log" \
        deploy/slurm/merge.sbatch "$shards")
echo "shards: job array ${array} (1-${shards}); merge: job ${merge%%;*}; reports in ${OUT}/"
