"""``gym.make_vec("GenesisMultiGPU-v0")`` in a fresh interpreter that never imports gs_gym itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_make_vec_through_the_installed_hook():
    script = textwrap.dedent(
        """
        import json, sys
        import gymnasium as gym
        registered = "GenesisMultiGPU-v0" in gym.registry
        imported_early = "gs_gym" in sys.modules
        if __name__ == "__main__":
            env = gym.make_vec("GenesisMultiGPU-v0", num_envs=4, task="cartpole", backend="cpu", num_workers=2, seed=0)
            obs, info = env.reset(seed=0)
            obs, rew, term, trunc, info = env.step(env.action_space.sample())
            print(json.dumps({
                "registered": registered, "imported_early": imported_early, "shape": list(obs.shape),
                "type": type(obs).__module__, "spec_id": env.spec.id, "genesis_in_parent": "genesis" in sys.modules,
                "workers": env.worker_devices,
            }))
            env.close()
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {
        "registered": True,
        "imported_early": False,
        "shape": [4, 4],
        "type": "torch",
        "spec_id": "GenesisMultiGPU-v0",
        "genesis_in_parent": False,
        "workers": ["cpu", "cpu"],
    }
