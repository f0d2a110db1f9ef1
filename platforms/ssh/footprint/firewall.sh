# The host's firewall in the record (record_firewall) and back to it
# (reset_firewall): nftables tables and chains, iptables rules and chains
# of every variant present, ipsets. Set before these: iptables_undo
# (iptables-undo.awk).

# nft_chains prints each nftables chain of `nft list chains` on stdin as
# "family table chain", sorted.
nft_chains() {
	awk '$1 == "table" { t = $2 " " $3 } $1 == "chain" { print t, $2 }' | sort
}

# iptables_rules prints what $1-save prints, without comments and counters.
iptables_rules() {
	"$1-save" | sed -e '/^#/d' -e 's/ \[[0-9]*:[0-9]*\]$//'
}

# record_firewall writes what the host's firewall holds into directory $1.
record_firewall() {
	if command -v nft >/dev/null; then
		nft list tables | sort >"$1/nft-tables"
		nft list chains | nft_chains >"$1/nft-chains"
	fi
	for v in iptables-nft ip6tables-nft iptables-legacy ip6tables-legacy; do
		if command -v "$v-save" >/dev/null; then
			iptables_rules "$v" >"$1/$v"
		fi
	done
	if command -v ipset >/dev/null; then
		ipset list -n | sort >"$1/ipsets"
	fi
}

# reset_firewall takes away what was added to the firewall since the
# record in directory $1: the new nftables tables, whole; in each
# iptables variant the rules added to chains that were there, then the
# chains that were not, table by table, in one restore; then the nftables
# chains that were not there, in tables that were (iptables-nft makes a
# built-in chain, FORWARD or OUTPUT, only when a rule goes into it, and
# leaves it, empty, when the rule goes); the new ipsets.
reset_firewall() {
	if [ -e "$1/nft-tables" ]; then
		nft list tables | sort | comm -13 "$1/nft-tables" - | while IFS= read -r t; do
			nft delete "$t"
		done
	fi
	for v in iptables-nft ip6tables-nft iptables-legacy ip6tables-legacy; do
		[ -e "$1/$v" ] || continue
		iptables_rules "$v" | awk -v before="$1/$v" "$iptables_undo" >"$1/$v.undo"
		if [ -s "$1/$v.undo" ]; then
			"$v-restore" --noflush <"$1/$v.undo" || echo "footprint: $v: cannot undo the cluster's rules" >&2
		fi
	done
	# A record made before kiln recorded chains has none to compare.
	if [ -e "$1/nft-chains" ]; then
		nft list chains | nft_chains | comm -13 "$1/nft-chains" - | while read -r family table chain; do
			nft delete chain "$family" "$table" "$chain" 2>/dev/null ||
				echo "footprint: nftables chain $chain of table $family $table was not there before the install, but it holds rules now: it is left" >&2
		done
	fi
	if [ -e "$1/ipsets" ] && command -v ipset >/dev/null; then
		ipset list -n | sort | comm -13 "$1/ipsets" - | while IFS= read -r s; do
			ipset destroy "$s"
		done
	fi
}
