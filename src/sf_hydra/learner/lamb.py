"""LAMB: layer-wise adaptive moments (You et al., arXiv 1904.00962, Algorithm 2), written
here because torch has no LAMB (`algo.optimizer_type=lamb`, Sample Factory's `--optimizer lamb`).

Per parameter tensor x (a "layer") with gradient g, at step t:

    m = beta1 m + (1 - beta1) g             v = beta2 v + (1 - beta2) g^2
    m_hat = m / (1 - beta1^t)               v_hat = v / (1 - beta2^t)
    r = m_hat / (sqrt(v_hat) + eps) + weight_decay * x      (Adam's direction, plus decay)
    trust = clip(min(||x||, max_weight_norm) / ||r||, min_trust, 1 / min_trust)
    x = x - lr * trust * r

so each layer moves by lr times its own norm, whatever the gradient's scale. The paper's
scaling function phi bounds the weight norm; the defaults are Sample Factory's Lamb's (phi
caps ||x|| at 10, the ratio stays in [0.01, 100], weight decay 1e-4), so `--optimizer lamb`
means the same here. max_weight_norm=inf and min_trust=0 give phi = identity, unbounded. A
layer whose weights or update are all zero (e.g. a bias at its zero initialization) takes the
plain step lr * r. The other constructor arguments are Adam's, so `algo.optimizer`'s
lr/betas/eps keys apply unchanged.
"""

from __future__ import annotations

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 1e-4,
                 max_weight_norm: float = 10.0, min_trust: float = 0.01):
        if not lr > 0.0:
            raise ValueError(f"Lamb: lr={lr} must be > 0")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Lamb: betas={betas} must be in [0, 1)")
        if not eps > 0.0:
            raise ValueError(f"Lamb: eps={eps} must be > 0")
        if not weight_decay >= 0.0:
            raise ValueError(f"Lamb: weight_decay={weight_decay} must be >= 0")
        if not max_weight_norm > 0.0:
            raise ValueError(f"Lamb: max_weight_norm={max_weight_norm} must be > 0 (inf: no cap)")
        if not 0.0 <= min_trust <= 1.0:
            raise ValueError(f"Lamb: min_trust={min_trust} must be in [0, 1] (0: no bound on the trust ratio)")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "max_weight_norm": max_weight_norm, "min_trust": min_trust})

    def __setstate__(self, state):
        """A state saved before the bounds existed (load_state_dict) takes this instance's."""
        super().__setstate__(state)
        for group in self.param_groups:
            for key in ("max_weight_norm", "min_trust"):
                group.setdefault(key, self.defaults[key])

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                m_hat = m / (1.0 - beta1 ** state["step"])
                v_hat = v / (1.0 - beta2 ** state["step"])
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"] > 0:
                    update.add_(p, alpha=group["weight_decay"])
                weight_norm, update_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(update)
                ratio = weight_norm.clamp(max=group["max_weight_norm"]) / update_norm
                low = group["min_trust"]
                ratio = ratio.clamp(min=low, max=1.0 / low) if low > 0 else ratio
                trust = torch.where((weight_norm > 0) & (update_norm > 0), ratio, torch.ones_like(weight_norm))
                p.sub_(update * (group["lr"] * trust))
        return loss
