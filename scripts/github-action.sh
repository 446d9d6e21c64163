#!/usr/bin/env bash
# The check step of the ckptlint GitHub Action (action.yml); tests/test_ci_docs.py runs it as the
# Action does. Reads its inputs from the environment:
#   CKPTLINT_BIN          the ckptlint executable (default: ckptlint)
#   CKPTLINT_CHECKPOINTS  checkpoints, separated by spaces or newlines (directories, files, hf://…)
#   CKPTLINT_TARGETS      target specs, separated by spaces or newlines (sglang==0.5.23 'vllm>=0.24' …)
#   CKPTLINT_ARGS         more arguments for `ckptlint check`, split on spaces (no quoting)
#   CKPTLINT_SARIF        "true": also write a SARIF file (for github/codeql-action/upload-sarif)
#   CKPTLINT_SUMMARY      "true": append the Markdown report to $GITHUB_STEP_SUMMARY
# One `ckptlint check` writes the annotations and the log (--format github) and, with --report,
# the SARIF file and the Markdown summary. Its exit code goes to the step output `exit-code`
# (with `sarif-file`); the step itself succeeds, so that the SARIF upload runs, and the Action's
# last step fails the job when the exit code is not 0.
set -uo pipefail
set -f  # no globbing of the inputs

bin="${CKPTLINT_BIN:-ckptlint}"
# shellcheck disable=SC2206  # word splitting is the input format
checkpoints=(${CKPTLINT_CHECKPOINTS:-})
targets=()
for t in ${CKPTLINT_TARGETS:-}; do targets+=(--target "$t"); done
# shellcheck disable=SC2206
extra=(${CKPTLINT_ARGS:-})
if [ "${#checkpoints[@]}" -eq 0 ]; then
  echo "::error title=ckptlint::the 'checkpoints' input names no checkpoint"
  echo "exit-code=2" >> "${GITHUB_OUTPUT:-/dev/null}"
  exit 0
fi

out_dir="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
reports=()
sarif=""
summary=""
if [ "${CKPTLINT_SARIF:-true}" = "true" ]; then
  sarif="$out_dir/ckptlint.sarif"
  reports+=(--report "sarif:$sarif")
fi
if [ "${CKPTLINT_SUMMARY:-true}" = "true" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  summary="$out_dir/ckptlint-summary.md"
  reports+=(--report "markdown:$summary")
fi

rm -f -- "$sarif" "$summary"
"$bin" check "${checkpoints[@]}" "${targets[@]}" "${extra[@]}" --format github "${reports[@]}"
code=$?

if [ -n "$summary" ] && [ -f "$summary" ]; then
  cat -- "$summary" >> "$GITHUB_STEP_SUMMARY"
fi
{
  echo "exit-code=$code"
  if [ -n "$sarif" ] && [ -f "$sarif" ]; then echo "sarif-file=$sarif"; fi
} >> "${GITHUB_OUTPUT:-/dev/null}"
exit 0
