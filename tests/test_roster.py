"""The model roster: the shipped files validate, and a mistake in a YAML names the file and the field."""
from __future__ import annotations

from pathlib import Path

import pytest

from mkb_ray.models.roster import ModelSpec, RosterError, get_model, load_model_file, load_roster

# The six models of the MetaKernelBench paper (its run.sh aliases), plus the embedded default.
PAPER_MODELS = {"deepseek-v4-pro", "glm-5.3", "glm-5.3-flash", "gemini-3.7-flash", "gpt-5.6-sol", "qwen3.8-flash"}

SMALL_LOCAL = """\
name: tiny
serving: local_vllm
local_source: smollm2_gguf
supports_tools: false
context_length: 4096
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_shipped_roster_has_the_paper_models_and_smollm2():
    roster = load_roster()
    assert set(roster) == PAPER_MODELS | {"smollm2"}
    smol = roster["smollm2"]
    assert smol.serving == "local_vllm" and smol.num_gpus == 0 and not smol.supports_tools
    assert smol.litellm_id == "hosted_vllm/smollm2"
    for name in PAPER_MODELS:
        spec = roster[name]
        assert spec.supports_tools and spec.api_litellm_id, name
        assert spec.litellm_id == (f"hosted_vllm/{name}" if spec.is_local else spec.api_litellm_id)
    # At least one open-weight model is served by us on GPUs: the Ray Serve LLM path has a real roster entry.
    gpu_local = [s for s in roster.values() if s.is_local and s.num_gpus > 0]
    assert gpu_local and all(s.hf_repo and s.num_gpus == s.tensor_parallel_size for s in gpu_local)


def test_shipped_tool_call_parsers_exist_in_the_installed_vllm():
    parsers = pytest.importorskip("vllm.tool_parsers")
    known = set(parsers._TOOL_PARSERS_TO_REGISTER)
    for spec in load_roster().values():
        assert spec.tool_call_parser in known, (spec.name, spec.tool_call_parser)


def test_a_typo_names_the_file_and_the_field(tmp_path):
    path = write(tmp_path, "tiny", SMALL_LOCAL + "tensor_paralel_size: 2\n")
    with pytest.raises(RosterError) as err:
        load_roster(tmp_path)
    assert str(path) in str(err.value)
    assert "tensor_paralel_size: unknown field" in str(err.value)


def test_a_wrong_value_names_the_field(tmp_path):
    write(tmp_path, "tiny", SMALL_LOCAL.replace("context_length: 4096", "context_length: lots"))
    with pytest.raises(RosterError, match=r"tiny\.yaml: context_length: .*integer"):
        load_roster(tmp_path)
    write(tmp_path, "tiny", SMALL_LOCAL.replace("serving: local_vllm", "serving: ollama"))
    with pytest.raises(RosterError, match=r"serving: .*'local_vllm' or 'api'"):
        load_roster(tmp_path)


@pytest.mark.parametrize("edit, message", [
    (("local_source: smollm2_gguf\n", ""), "needs hf_repo or local_source"),
    (("serving: local_vllm", "serving: api"), "needs api_litellm_id"),
    (("local_source: smollm2_gguf\n", "hf_repo: org/m\ntensor_parallel_size: 4\nnum_gpus: 2\n"),
     "num_gpus 2 must equal"),
    (("local_source: smollm2_gguf\n", "hf_repo: org/m\ntensor_parallel_size: 2\n"), "CPU serving"),
    (("context_length: 4096\n", "context_length: 4096\nmin_replicas: 3\nmax_replicas: 2\n"), "min_replicas 3"),
])
def test_inconsistent_specs_are_rejected(tmp_path, edit, message):
    write(tmp_path, "tiny", SMALL_LOCAL.replace(*edit))
    with pytest.raises(RosterError, match=message):
        load_roster(tmp_path)


def test_the_name_must_match_the_file(tmp_path):
    path = write(tmp_path, "other", SMALL_LOCAL)
    with pytest.raises(RosterError, match="must match the file name 'other'"):
        load_model_file(path)


def test_not_a_mapping_and_bad_yaml(tmp_path):
    write(tmp_path, "tiny", "- just\n- a list\n")
    with pytest.raises(RosterError, match="expected a mapping"):
        load_roster(tmp_path)
    write(tmp_path, "tiny", "name: [unclosed\n")
    with pytest.raises(RosterError, match="invalid YAML"):
        load_roster(tmp_path)


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(KeyError, match="smollm2"):
        get_model("gpt-2")


def test_prices_are_flat_on_the_spec():
    spec = ModelSpec(name="p", serving="api", api_litellm_id="openai/p", supports_tools=True, context_length=1024,
                     prices={"usd_per_mtok_input": 1.5, "usd_per_mtok_output": 6.0})
    assert (spec.usd_per_mtok_input, spec.usd_per_mtok_output, spec.usd_per_gpu_hour) == (1.5, 6.0, None)
    assert spec.litellm_id == "openai/p" and not spec.is_local
