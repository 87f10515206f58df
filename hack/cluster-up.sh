#!/usr/bin/env bash
# Starts a throwaway Kubernetes control plane on 127.0.0.1 for the e2e tests: etcd,
# kube-apiserver, kube-controller-manager (its garbage collector and namespace controller
# finish the foreground deletes `pulumi destroy` issues; its Deployment, ReplicaSet and
# DaemonSet controllers make the controllers' and the device plugin's pods; its node
# lifecycle controller lifts a new node's not-ready taint once its kubelet beats; its pod
# garbage collector removes what was left on a node that is gone, as when the fake EKS
# replaces the system nodes; its CronJob and Job controllers open and close the warm windows)
# and kube-scheduler. No kubelet: the e2e registers the nodes and runs the pods with a stand-in
# (e2e/kubelet_standin_test.go), from the first up on; Helm releases install with
# helmSkipAwait, since no node exists during that up.
#
# Usage: hack/cluster-up.sh DIR    writes DIR/kubeconfig, DIR/pids; prints the kubeconfig path
# Needs the tools of hack/e2e-tools.sh (eval "$(hack/e2e-tools.sh --env)").
set -euo pipefail
dir=${1:?usage: cluster-up.sh DIR}
: "${E2E_KUBE_APISERVER:?run: eval \"\$(hack/e2e-tools.sh --env)\"}"
: "${E2E_KUBE_CONTROLLER_MANAGER:?}" "${E2E_ETCD:?}"
mkdir -p "$dir"
cd "$dir"
log() { printf '[cluster-up %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
etcd_port=$(free_port)
peer_port=$(free_port)
api_port=$(free_port)

# Certificates: a CA, the API server's serving cert for 127.0.0.1, an admin client cert in
# system:masters, and the service-account signing key.
openssl_quiet() { openssl "$@" >/dev/null 2>&1; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=e2e-ca" -keyout ca.key -out ca.crt
openssl_quiet req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout server.key -out server.csr
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
openssl_quiet x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt
openssl_quiet req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=e2e-admin" -keyout admin.key -out admin.csr
printf 'extendedKeyUsage=clientAuth\n' >admin.ext
openssl_quiet x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile admin.ext -out admin.crt
openssl_quiet genrsa -out sa.key 2048
openssl_quiet rsa -in sa.key -pubout -out sa.pub

b64() { base64 -w0 <"$1"; }
cat >kubeconfig <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(b64 ca.crt)
users:
- name: admin
  user:
    client-certificate-data: $(b64 admin.crt)
    client-key-data: $(b64 admin.key)
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
KCFG

: >pids
"$E2E_ETCD" --name e2e --data-dir "$dir/etcd" --unsafe-no-fsync \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-cluster "e2e=http://127.0.0.1:$peer_port" >etcd.log 2>&1 &
echo $! >>pids

"$E2E_KUBE_APISERVER" --etcd-servers="http://127.0.0.1:$etcd_port" \
	--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
	--tls-cert-file=server.crt --tls-private-key-file=server.key --client-ca-file=ca.crt \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file=sa.pub --service-account-signing-key-file=sa.key \
	--service-cluster-ip-range=10.0.0.0/24 --authorization-mode=RBAC \
	--allow-privileged=true --endpoint-reconciler-type=none >kube-apiserver.log 2>&1 &
echo $! >>pids

for i in $(seq 1 120); do
	if curl -sf --cacert ca.crt --cert admin.crt --key admin.key "https://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; then
		break
	fi
	if [[ $i == 120 ]]; then
		log "kube-apiserver did not become ready; last log lines:"
		tail -20 kube-apiserver.log >&2
		exit 1
	fi
	sleep 0.5
done

"$E2E_KUBE_CONTROLLER_MANAGER" --kubeconfig=kubeconfig \
	--authentication-kubeconfig=kubeconfig --authorization-kubeconfig=kubeconfig \
	--controllers=namespace,garbagecollector,serviceaccount,serviceaccount-token,disruption,daemonset,nodelifecycle,deployment,replicaset,podgc,cronjob,job \
	--service-account-private-key-file=sa.key --root-ca-file=ca.crt \
	--bind-address=127.0.0.1 --secure-port=0 --leader-elect=false >kube-controller-manager.log 2>&1 &
echo $! >>pids

"$E2E_KUBE_SCHEDULER" --kubeconfig=kubeconfig \
	--authentication-kubeconfig=kubeconfig --authorization-kubeconfig=kubeconfig \
	--bind-address=127.0.0.1 --secure-port=0 --leader-elect=false >kube-scheduler.log 2>&1 &
echo $! >>pids

log "API server ready on 127.0.0.1:$api_port"
echo "$dir/kubeconfig"
