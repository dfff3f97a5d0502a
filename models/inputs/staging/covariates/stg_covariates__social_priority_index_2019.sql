-- Social priority index (IPS) 2019 (RM), one row per line of the headerless file.
{{ stage_headerless_covariate(source('covariates', 'social_priority_index_2019_rm')) }}
