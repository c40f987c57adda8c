#!/bin/bash
nvidia-smi -L > /app/gpus.txt
