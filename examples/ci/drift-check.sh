#!/usr/bin/env bash
# Drift check: does the real infrastructure still match the Terraform configuration?
#
# Usage: drift-check.sh [DIR] [-- PLAN-ARGUMENTS...]
#   e.g. drift-check.sh infra/gpu-pools -- -var-file=prod.tfvars
#
# Runs `terraform plan -detailed-exitcode` in DIR (default: the current directory, already
# initialised with `terraform init`), prints the plan, then one message, and exits with:
#   0  no drift: the infrastructure matches the configuration
#   2  drift: the plan would change something (changed outside Terraform, or not applied yet)
#   1  error: the plan failed (credentials, an unreachable or failing API, a bad configuration),
#      so nothing is known about drift
# In GitHub Actions the message is also an annotation on the run and a line of the job summary.
# TERRAFORM names the terraform binary (default: terraform on the PATH).
set -uo pipefail

dir="."
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  dir="$1"
  shift
fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then
  shift
fi
terraform="${TERRAFORM:-terraform}"

out="$(mktemp)"
trap 'rm -f "$out"' EXIT

"$terraform" -chdir="$dir" plan -detailed-exitcode -input=false -no-color "$@" >"$out" 2>&1
code=$?
cat "$out"
echo

# report LEVEL TITLE MESSAGE: prints the message, and in GitHub Actions annotates the run.
report() {
  printf '%s\n' "$3"
  if [ "${GITHUB_ACTIONS:-}" = "true" ]; then
    # Annotations are one line: GitHub decodes %0A back into line breaks.
    local encoded="${3//'%'/'%25'}"
    encoded="${encoded//$'\n'/'%0A'}"
    printf '::%s title=%s::%s\n' "$1" "$2" "$encoded"
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
      printf '### %s\n\n~~~\n%s\n~~~\n' "$2" "$3" >>"$GITHUB_STEP_SUMMARY"
    fi
  fi
}

case "$code" in
  0)
    report notice "No drift" "NO DRIFT in ${dir}: the infrastructure matches the configuration."
    exit 0
    ;;
  2)
    # Refresh notes ("has changed") say what moved outside Terraform; plan lines say what an
    # apply would do about it.
    changes="$(grep -E '^  # .* (has changed|has been deleted|will be|must be)' "$out" | sed 's/^  # /  - /')"
    summary="$(grep -E '^Plan: ' "$out" | head -n 1)"
    report error "Drift detected" "DRIFT in ${dir}: the infrastructure no longer matches the configuration.
${changes}
${summary}
Someone changed these resources outside Terraform, or the configuration has changes not applied yet.
Run \`terraform apply\` to restore the declared state, or change the configuration to adopt the new one."
    exit 2
    ;;
  *)
    errors="$(grep -E '^(│ )?Error: ' "$out" | sed -E 's/^(│ )?/  - /')"
    report error "Drift check failed" "ERROR in ${dir}: terraform plan failed (exit ${code}), so drift is unknown.
${errors:-  (no error message; see the output above)}
Check the credentials, that the cloud APIs answer, and that the configuration is valid, then run the check again."
    exit 1
    ;;
esac
