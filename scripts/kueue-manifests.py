#!/usr/bin/env python3
"""Kueue's CRDs and webhook configurations for a Kueue manager that serves its webhooks at a URL.

Kueue's release manifests reach its webhook server through a Service (webhook-service in
kueue-system) and get their CA bundle from Kueue's internal certificate management. A manager
started outside the cluster (scripts/k8s-env.sh, k8s_kueue_start) is reached at a URL instead, with
a certificate the caller made. This reads the manifests that scripts/k8s-tools.sh copies from
Kueue's module (config/components/crd and config/components/webhook, each with the
kustomization.yaml that lists its resources and patches) and prints, as a YAML stream for
`kubectl apply --server-side -f -`:
  - every CRD the crd kustomization lists; those that its patches give a conversion webhook get
    spec.conversion with clientConfig {url: URL/convert, caBundle};
  - the Mutating- and ValidatingWebhookConfiguration, named kueue-<name> as Kueue's release names
    them, each webhook's clientConfig {url: URL + its path, caBundle}, with the kustomization's
    patches (the namespaceSelectors of the pod, deployment and statefulset webhooks) merged in by
    webhook name.

Usage: kueue-manifests.py MANIFESTS_DIR URL CA_FILE
  URL: https://127.0.0.1:PORT (no trailing slash); CA_FILE: PEM of the CA that signed the
  webhook server's certificate.
Exit status 1 with a message naming the file when the manifests do not have the expected shape.
"""
import base64
import os
import sys

import yaml


def fail(msg):
    sys.stderr.write(f"kueue-manifests: error: {msg}\n")
    sys.exit(1)


def load_all(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as e:
        fail(f"cannot read {path}: {e}")


def load_one(path):
    docs = load_all(path)
    if len(docs) != 1:
        fail(f"{path}: expected one YAML document, found {len(docs)}")
    return docs[0]


def client_config(url, ca_b64, service, where):
    """The clientConfig that replaces SERVICE ({name, namespace, path})."""
    path = (service or {}).get("path")
    if not path:
        fail(f"{where}: clientConfig.service.path is missing")
    return {"url": url + path, "caBundle": ca_b64}


def crds(crd_dir, url, ca_b64):
    kust = load_one(os.path.join(crd_dir, "kustomization.yaml"))
    converting = {}  # CRD name -> conversion.webhook of its patch
    for patch in kust.get("patches") or []:
        p = load_one(os.path.join(crd_dir, patch["path"]))
        webhook = (p.get("spec", {}).get("conversion") or {}).get("webhook")
        if webhook:
            converting[p["metadata"]["name"]] = webhook
    out = []
    for res in kust.get("resources") or []:
        path = os.path.join(crd_dir, res)
        crd = load_one(path)
        name = crd["metadata"]["name"]
        if name in converting:
            webhook = converting.pop(name)
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": client_config(
                        url, ca_b64, webhook.get("clientConfig", {}).get("service"), path),
                    "conversionReviewVersions": webhook.get("conversionReviewVersions", ["v1"]),
                },
            }
        out.append(crd)
    if converting:
        fail(f"{crd_dir}: conversion patches name CRDs that are not listed: {sorted(converting)}")
    return out


def webhook_configurations(webhook_dir, url, ca_b64):
    kust = load_one(os.path.join(webhook_dir, "kustomization.yaml"))
    patches = {}  # (kind, config name) -> {webhook name: fields to merge}
    for patch in kust.get("patches") or []:
        if "patch" not in patch:
            fail(f"{webhook_dir}/kustomization.yaml: only inline patches are understood")
        p = yaml.safe_load(patch["patch"])
        key = (p["kind"], p["metadata"]["name"])
        for w in p.get("webhooks") or []:
            patches.setdefault(key, {})[w["name"]] = {k: v for k, v in w.items() if k != "name"}
    out = []
    for res in kust.get("resources") or []:
        path = os.path.join(webhook_dir, res)
        for doc in load_all(path):
            if doc.get("kind") not in ("MutatingWebhookConfiguration",
                                       "ValidatingWebhookConfiguration"):
                continue  # the Service: not used when the webhooks are reached by URL
            key = (doc["kind"], doc["metadata"]["name"])
            merges = patches.pop(key, {})
            for w in doc.get("webhooks") or []:
                w["clientConfig"] = client_config(
                    url, ca_b64, w.get("clientConfig", {}).get("service"),
                    f"{path}: webhook {w.get('name')}")
                w.update(merges.pop(w["name"], {}))
            if merges:
                fail(f"{webhook_dir}/kustomization.yaml: patches name webhooks that "
                     f"{key[1]} lacks: {sorted(merges)}")
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            out.append(doc)
    if patches:
        fail(f"{webhook_dir}/kustomization.yaml: patches name configurations that are not "
             f"listed: {sorted(k[1] for k in patches)}")
    if len(out) != 2:
        fail(f"{webhook_dir}: expected a mutating and a validating configuration, found {len(out)}")
    return out


def main(argv):
    if len(argv) != 4:
        fail("usage: kueue-manifests.py MANIFESTS_DIR URL CA_FILE")
    root, url, ca_file = argv[1], argv[2].rstrip("/"), argv[3]
    try:
        with open(ca_file, "rb") as f:
            ca_b64 = base64.b64encode(f.read()).decode("ascii")
    except OSError as e:
        fail(f"cannot read the CA file {ca_file}: {e}")
    docs = crds(os.path.join(root, "crd"), url, ca_b64)
    docs += webhook_configurations(os.path.join(root, "webhook"), url, ca_b64)
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv)
