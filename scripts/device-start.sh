# Sourced first by the scripts that build and run on the GPU machine (scripts/device-check.sh,
# examples/adi/device_run.sh, bench/dense_gpu/device_run.sh), with OUT set and the log's name as
# its argument: copies all further output to $OUT/<log>, says which machine this is, and
# unpacks the dependencies carried in .debs/ (scripts/device-deps.sh). Run from the repository
# root.
mkdir -p "$OUT"
exec > >(tee "$OUT/$1") 2>&1
{ head -2 /etc/os-release; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nproc; } 2>&1
source scripts/device-deps.sh
