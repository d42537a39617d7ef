#!/usr/bin/env bash
# Device run 65g: run 65f's report (carried back as .device/prof-65f.ncu-rep) printed raw, for the stall reasons.
/usr/local/cuda/bin/ncu --import .device/prof-65f.ncu-rep --page raw > $OUT/raw.txt 2>&1; echo "rc=$?"
grep -iE 'stall|issue_active|inst_executed.sum |cycles_active.avg |warps_active' $OUT/raw.txt | head -80
