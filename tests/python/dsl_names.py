"""The DSL's IR without its ``checkpoint_names`` (the definition's weight table), for comparison with
`surogate ir`, whose C++ builder takes the names from the engine's table: the names are checked
against that table here, so the comparison still covers every weight's checkpoint name."""
import copy


def without_checkpoint_names(ir, model_dir):
    from surogate.dsl import ModelConfig

    ir = copy.deepcopy(ir)
    names = ir.pop("checkpoint_names")
    table = {row["name"]: row["hf_name"] for row in ModelConfig(str(model_dir)).parameter_table()}
    assert names == table
    assert list(names) == list(table)  # the engine's order
    return ir
