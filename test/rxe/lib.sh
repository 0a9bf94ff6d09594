# lib.sh -- guest-side helpers for mptx's rxe VM jobs (sourced).
#
# Topology: each "path" is a veth pair whose two ends both stay in the
# initial network namespace (rdma_rxe on Debian's 6.1 kernel opens its UDP
# 4791 socket and routes only there; an rxe device inside another netns
# completes every WR with IBV_WC_LOC_QP_OP_ERR). Policy routing forces
# traffic between the two local addresses across the veth "wire" instead
# of lo: the `local` rule moves from pref 0 to 1000, `oif DEV lookup T`
# rules send each side out of its own veth (rxe sets the flow's oif to its
# netdev), accept_local/rp_filter let a host accept its own source
# addresses, and permanent neighbour entries replace ARP. `ip link set X
# down` and tc qdiscs on a veth therefore act on the RDMA traffic itself.

_paths=0

# rxe_pair A B IPA IPB MTU RXEA RXEB: veth A<->B (/32 addresses) with
# Soft-RoCE devices RXEA on A and RXEB on B; waits until both are ACTIVE.
rxe_pair() {
  local a=$1 b=$2 ipa=$3 ipb=$4 mtu=$5 ra=$6 rb=$7
  local ta=$((200 + 2 * _paths)) tb=$((201 + 2 * _paths))
  if [ "$_paths" = 0 ]; then
    sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.default.accept_local=1 \
      net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    ip rule add pref 1000 lookup local
    ip rule del pref 0 lookup local
  fi
  ip link add "$a" mtu "$mtu" type veth peer name "$b" mtu "$mtu" || return 1
  sysctl -qw "net.ipv4.conf.$a.accept_local=1" "net.ipv4.conf.$b.accept_local=1" \
    "net.ipv4.conf.$a.rp_filter=0" "net.ipv4.conf.$b.rp_filter=0"
  ip addr add "$ipa/32" dev "$a" && ip addr add "$ipb/32" dev "$b" || return 1
  ip link set "$a" up && ip link set "$b" up || return 1
  ip neigh replace "$ipb" lladdr "$(cat /sys/class/net/$b/address)" dev "$a" nud permanent
  ip neigh replace "$ipa" lladdr "$(cat /sys/class/net/$a/address)" dev "$b" nud permanent
  ip rule add pref $((100 + 2 * _paths)) oif "$a" lookup "$ta"
  ip rule add pref $((101 + 2 * _paths)) oif "$b" lookup "$tb"
  ip route add "$ipb/32" dev "$a" src "$ipa" table "$ta"
  ip route add "$ipa/32" dev "$b" src "$ipb" table "$tb"
  # rdma_rxe (6.1) runs a QP's requester both inline in the poster's
  # context and as a tasklet on whatever CPU the completer ran, and veth
  # queues each packet on the sending CPU's backlog: packets of one QP then
  # overtake each other, every reordering costs a NAK and a go-back-N
  # retransmission, and we saw QPs stop making progress after a few rounds
  # of that. Steering both ends' receive processing to CPU 0 (RPS) keeps
  # each QP's packets in order.
  echo 1 >"/sys/class/net/$a/queues/rx-0/rps_cpus"
  echo 1 >"/sys/class/net/$b/queues/rx-0/rps_cpus"
  rdma link add "$ra" type rxe netdev "$a" || return 1
  rdma link add "$rb" type rxe netdev "$b" || return 1
  _paths=$((_paths + 1))
  rxe_wait_active "$ra" && rxe_wait_active "$rb"
}

# rxe_wait_active DEV: wait up to 20 s for port 1 of DEV to be ACTIVE.
rxe_wait_active() {
  local i
  for i in $(seq 100); do
    grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "lib.sh: $1 never became ACTIVE" >&2
  return 1
}

# rxe_gid DEV IPV4: the index of DEV's RoCE v2 GID ::ffff:IPV4 (one grep
# over the table: starting processes costs 10-50 ms each under TCG).
rxe_gid() {
  local want f
  # shellcheck disable=SC2046
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo "$2" | tr . ' '))
  for f in $(grep -lx "$want" /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null); do
    if [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/${f##*/}" 2>/dev/null)" = "RoCE v2" ]; then
      echo "${f##*/}"; return 0
    fi
  done
  echo "lib.sh: no RoCE v2 GID for $2 on $1" >&2
  return 1
}

# wait_tcp PORT: wait up to 30 s for a TCP listener on PORT.
wait_tcp() {
  local i
  for i in $(seq 150); do
    ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
    sleep 0.2
  done
  echo "lib.sh: nothing listens on tcp/$1" >&2
  return 1
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }
