import json, sys, numpy as np
d = json.load(open(sys.argv[1]))
C = d["C"]; ue = np.array(d["uniform_exact"]); n_m = ue.shape[0]
spend_u = ue[0, 1]
rng = np.random.default_rng(0)
print(f"{sys.argv[1]}: C={C:.0f} n_u={d['n_u']} models={n_m} uniform mse={ue[:,0].mean():.5f} spend/C={spend_u/C:.3f}")
res = {}
for k in ("pai", "pai_costs"):
    a = np.array(d[k]); i = a[:, 0].astype(int)
    per_mse = np.bincount(i, a[:, 2] ** 2) / np.bincount(i)
    per_spend = np.bincount(i, a[:, 4]) / np.bincount(i)
    res[k] = (per_mse, per_spend)
    boots = []
    for _ in range(2000):
        b = rng.integers(0, n_m, n_m)
        boots.append(ue[b, 0].mean() * spend_u / (per_mse[b].mean() * per_spend[b].mean()))
    eff = ue[:, 0].mean() * spend_u / (per_mse.mean() * per_spend.mean())
    print(f"  {k}: runs={len(a)} draws={a[:,5].mean():.1f} rmse={np.sqrt(per_mse.mean()):.4f} bias={a[:,2].mean():+.4f} "
          f"cov={a[:,3].mean():.3f} spend/C={per_spend.mean()/C:.3f} (sd {a[:,4].std()/C:.3f}) "
          f"MSE ratio={ue[:,0].mean()/per_mse.mean():.2f} eff/cost={eff:.2f} [{np.quantile(boots,.025):.2f}, {np.quantile(boots,.975):.2f}]")
b = [];
for _ in range(2000):
    s = rng.integers(0, n_m, n_m)
    b.append((res["pai"][0][s].mean() * res["pai"][1][s].mean()) / (res["pai_costs"][0][s].mean() * res["pai_costs"][1][s].mean()))
r = (res["pai"][0].mean() * res["pai"][1].mean()) / (res["pai_costs"][0].mean() * res["pai_costs"][1].mean())
print(f"  costs vs cost-blind PAI, variance x spend ratio: {r:.3f} [{np.quantile(b,.025):.3f}, {np.quantile(b,.975):.3f}]")
