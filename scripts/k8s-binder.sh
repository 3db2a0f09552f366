#!/usr/bin/env bash
# The test control plane's stand-in scheduler (no kube-scheduler runs): binds every unbound,
# undeleted pod to NODE, every 0.3 s. Started by k8s_start_gpu_node in scripts/k8s-env.sh.
# Usage: k8s-binder.sh KUBECTL KUBECONFIG CACHE_DIR NODE
k() { "$1" --kubeconfig "$2" --cache-dir "$3" "${@:5}"; }
while true; do
  k "$1" "$2" "$3" "$4" get pods -A --field-selector spec.nodeName= \
    -o 'jsonpath={range .items[*]}{.metadata.namespace} {.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
    while read -r ns name deleting; do
      [[ -n $name && -z $deleting ]] || continue
      printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"%s"},"target":{"apiVersion":"v1","kind":"Node","name":"%s"}}' "$name" "$4" |
        k "$1" "$2" "$3" "$4" create --raw "/api/v1/namespaces/$ns/pods/$name/binding" -f - >/dev/null 2>&1 || true
    done
  sleep 0.3
done
