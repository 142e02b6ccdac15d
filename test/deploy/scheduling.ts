// Which nodes a DaemonSet's pods land on: the part of the scheduler the trial
// patches rely on - spec.nodeSelector (every label must match) and required
// node affinity (any term; every expression of a term). Taints are not
// modelled: both proxies tolerate everything.

export type Labels = Readonly<Record<string, string>>;

interface Expr {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist' | 'Gt' | 'Lt';
  values?: string[];
}
interface PodSpecLike {
  nodeSelector?: Record<string, string>;
  affinity?: {
    nodeAffinity?: {
      requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms: Array<{ matchExpressions?: Expr[] }> };
    };
  };
}

function matches(e: Expr, labels: Labels): boolean {
  const has = Object.hasOwn(labels, e.key);
  const v = labels[e.key];
  switch (e.operator) {
    case 'In':
      return has && (e.values ?? []).includes(v!);
    case 'NotIn':
      return !has || !(e.values ?? []).includes(v!);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    case 'Gt':
      return has && Number(v) > Number(e.values?.[0]);
    case 'Lt':
      return has && Number(v) < Number(e.values?.[0]);
  }
}

/** True when a pod with this spec may run on a node with these labels. */
export function schedulesOn(spec: PodSpecLike, labels: Labels): boolean {
  for (const [k, v] of Object.entries(spec.nodeSelector ?? {})) if (labels[k] !== v) return false;
  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!terms) return true;
  return terms.some((t) => (t.matchExpressions ?? []).every((e) => matches(e, labels)));
}
