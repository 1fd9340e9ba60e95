#!/usr/bin/env bash
# Grade a cohort inside the kit's container, with Docker or Podman: on macOS, Windows or a Linux machine
# without root, the grader still runs as root (in the container), so each worker gets the whole sandbox.
#   make grade-container [LAB=name] [SUBMISSIONS=dir] [OUT=dir] [JOBS=n] [FORCE=1] [SHARD=i/N] [IMAGE=name] [DRY_RUN=1]
# The variables are make grade's, and the container runs the very command make grade runs for them
# (make prints it: -n), SUBMISSIONS mounted read-only at /submissions and OUT writable at /grades.
# The image is built first from deploy/container/Containerfile and this folder (seconds when nothing
# changed); IMAGE=name grades in an image built before instead. --dry-run (DRY_RUN=1) prints the
# engine's commands and runs none.
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${IMAGE:-autograder-kit}

refuse() {
    echo "grade-container: $*" >&2
    exit 2
}

engine=
for candidate in docker podman; do
    if command -v "$candidate" > /dev/null && "$candidate" info > /dev/null 2>&1; then
        engine=$candidate
        break
    fi
done
if [ -z "$engine" ]; then
    for candidate in docker podman; do
        command -v "$candidate" > /dev/null &&
            refuse "$candidate is installed but its engine does not answer ($candidate info failed):" \
                   "start it (Docker Desktop; podman machine start) and run this again"
    done
    refuse "needs Docker or Podman, and neither is installed: install Docker Desktop or Podman" \
           "(podman.io), or, on Linux as root, run make grade"
fi
# Root in a rootless engine's container is the user's own id, with too few ids mapped for each worker to
# get one of its own (autograder/harness/sandbox.py's UID_BASE: setuid fails).
case $engine in
    docker) rootless=$(docker info --format '{{.SecurityOptions}}') ;;
    podman) rootless=$(podman info --format 'rootless={{.Host.Security.Rootless}}') ;;
esac
case $rootless in
    *rootless=true* | *name=rootless*)
        refuse "$engine runs rootless here, where the grader cannot give each worker a user id of its own:" \
               "run it rootful (podman machine set --rootful; sudo $engine on Linux)" ;;
esac
# The gradebook would be the container's own, gone when it ends.
[ -z "${NBGRADER:-}" ] ||
    refuse "NBGRADER=1 records into the course's gradebook.db, which the container does not hold: grade" \
           "with SHARD=1/1 OUT=dir here, then record on this machine with make merge SHARDS=dir NBGRADER=1"

# make grade's own default, spelled out: a folder to mount must be named.
submissions=${SUBMISSIONS:-submitted}
[ -d "$submissions" ] || [ -n "${SUBMISSIONS:-}" ] || submissions=examples/submitted
[ -d "$submissions" ] || refuse "no submissions folder $submissions"
submissions=$(cd "$submissions" && pwd)
out=${OUT:-grades}
[[ $out = /* ]] || out=$PWD/$out
# Every variable of make grade reaches this make as it reached the one that started this script.
command=$(make -s --no-print-directory -n grade RUN_READY= SUBMISSIONS=/submissions OUT=/grades)
shopt -s extglob
command=${command//$'\\\n'*([[:blank:]])/ }  # the recipe's continued line as one
command=${command%%+([[:space:]])}

# Before the grade, in the container: the memory ceiling per worker needs cgroups the grader may write
# (autograder/harness/cgroup.py), which engines mount read-only; SYS_ADMIN remounts the container's own
# view writable, on cgroup v1 and v2 alike (Docker 28's writable-cgroups and Podman's
# unmask=/sys/fs/cgroup are v2 only). The reports then go to whoever owns OUT (under a root engine on
# Linux they would be root's).
# shellcheck disable=SC2016  # expanded in the container
prepare='for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/memory; do
    mount -o remount,bind,rw "$hierarchy" 2> /dev/null || true
done
trap "chown -R --reference=/grades /grades" EXIT'
build=("$engine" build -t "$image" -f deploy/container/Containerfile .)
# The privileges the worker sandbox needs as root (autograder/harness/sandbox.py), and no more: SYS_ADMIN
# to unshare PID, mount, network and IPC namespaces, mount its tmpfs and /proc, and pivot_root;
# seccomp=unconfined, as Docker's default profile refuses pivot_root even with SYS_ADMIN (the worker
# installs its own filter before student code runs); apparmor=unconfined, as docker-default refuses
# every mount. So the container is no boundary of its own for the grader: the sandbox is the worker's,
# as under make grade as root on Linux. --privileged would add every device and capability, which the
# sandbox does not need. No network: grading needs none.
run=("$engine" run --rm --init --network none
     --cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined
     -v "$submissions:/submissions:ro" -v "$out:/grades"
     "$image" sh -ec "$prepare"$'\n'"$command")

if [ "${1:-}" = --dry-run ]; then
    if [ -z "${IMAGE:-}" ]; then
        printf '%q ' "${build[@]}"
        echo
    fi
    printf '%q ' "${run[@]}"
    echo
    exit 0
fi
[ -n "${IMAGE:-}" ] || "${build[@]}"
mkdir -p "$out"  # made by its owner, not by the engine as root
exec "${run[@]}"
