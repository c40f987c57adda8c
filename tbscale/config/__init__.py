"""The configuration schema: experiments as pydantic models, read from YAML. Schema only: names
of registered components are resolved by the runner after loading."""

from tbscale.config.experiment import (ComponentSpec, EnvironmentConfig, Experiment, Limits, ModelConfig, Prices,
                                       Setting, Strict, TaskSource)
from tbscale.config.files import (beside_config, check_tasks_path, format_validation_error, read_experiment,
                                  read_yaml_mapping, validate_file)

__all__ = ["ComponentSpec", "EnvironmentConfig", "Experiment", "Limits", "ModelConfig", "Prices", "Setting", "Strict",
           "TaskSource", "beside_config", "check_tasks_path", "format_validation_error", "read_experiment",
           "read_yaml_mapping", "validate_file"]
