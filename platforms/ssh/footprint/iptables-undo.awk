# Reads the iptables-save output of now (stdin) and of before (the file
# named by the variable before), both without comments and counters, and
# prints an iptables-restore --noflush input that takes the difference
# away, table by table: the rules added to chains that were there are
# deleted, the user-defined chains that were not are flushed and deleted
# (a built-in chain, with a policy, is never deleted: its new rules are).
BEGIN {
	while ((getline l < before) > 0) {
		if (l ~ /^\*/) t = l
		had[t, l] = 1
		if (l ~ /^:/) { split(l, f, " "); chain[t, substr(f[1], 2)] = 1 }
	}
}
/^\*/ { table = $0; n = 0; m = 0; split("", rules); split("", isnew); split("", newc); next }
/^:/ { c = substr($1, 2); if ($2 == "-" && !((table, c) in chain)) { isnew[c] = 1; newc[++m] = c }; next }
/^-A / { if (!($2 in isnew) && !((table, $0) in had)) rules[++n] = "-D" substr($0, 3); next }
/^COMMIT/ {
	out = ""
	for (i = 1; i <= n; i++) out = out rules[i] "\n"
	for (i = 1; i <= m; i++) out = out "-F " newc[i] "\n"
	for (i = 1; i <= m; i++) out = out "-X " newc[i] "\n"
	if (out != "") printf "%s\n%sCOMMIT\n", table, out
}
